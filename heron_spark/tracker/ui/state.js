// Per-task state of an effectively-once topology: one row per instance of every stateful
// component, from the task metrics each stateful task publishes (gauges of its last checkpoint:
// keys, state bytes, the pause on its thread, the upload, the bytes uploaded; its last restore's
// time) and the stmgrs' __checkpoint-alignment-ms/<task> (first marker to last). Components
// without state metrics show no rows; a topology with none shows nothing. Runs in the browser.
import {get} from "./api.js";
import {el} from "./dom.js";
import {format, STMGR_COMPONENT} from "./metrics.js";

export const ALIGNMENT = "__checkpoint-alignment-ms";

/** Columns: key -> the task metric, and how it is shown ("count" or a "ms" time). */
export const STATE_COLUMNS = [
  {key: "keys", metric: "__state-keys", label: "Keys", kind: "count"},
  {key: "bytes", metric: "__state-bytes", label: "State bytes", kind: "count"},
  {key: "pause", metric: "__checkpoint-pause-ms", label: "Snapshot pause ms", kind: "ms"},
  {key: "upload", metric: "__checkpoint-upload-ms", label: "Upload ms", kind: "ms"},
  {key: "alignment", metric: null, label: "Alignment ms", kind: "ms"},
  {key: "uploaded", metric: "__checkpoint-uploaded-bytes", label: "Bytes uploaded", kind: "count"},
  {key: "restore", metric: "__state-restore-ms", label: "Restore ms", kind: "ms"},
];

/** Rows [{instance, task, component, values: {key -> number}}] of the stateful tasks of
 * `components`, from /topologies/metrics of each component and of the stmgrs. */
export async function stateRows(topo, physical, components, interval) {
  const metricname = STATE_COLUMNS.filter(c => c.metric).map(c => c.metric);
  const answers = await Promise.all(components.map(
    c => get("/topologies/metrics", {...topo, component: c, interval, metricname})));
  const instances = physical.instances || {};
  const rows = [];
  components.forEach((component, i) => {
    const metrics = answers[i]?.metrics || {};
    const ids = Object.keys(metrics["__state-keys"] || {}).sort(
      (a, b) => a.localeCompare(b, "en", {numeric: true}));
    for (const id of ids) {
      const values = {};
      for (const column of STATE_COLUMNS.filter(c => c.metric)) {
        const value = metrics[column.metric]?.[id];
        if (value !== undefined) values[column.key] = Number(value);
      }
      rows.push({instance: id, task: instances[id]?.task_id, component, values});
    }
  });
  if (!rows.length) return rows;
  const tasks = rows.map(r => r.task).filter(t => t !== undefined);
  const stmgrs = await get("/topologies/metrics", {
    ...topo, component: STMGR_COMPONENT, interval,
    metricname: tasks.map(t => `${ALIGNMENT}/${t}`)}).catch(() => ({}));
  for (const row of rows) {
    const per = stmgrs?.metrics?.[`${ALIGNMENT}/${row.task}`];
    if (per) row.values.alignment = Object.values(per).reduce((a, b) => a + Number(b), 0);
  }
  return rows;
}

function show(value, kind) {
  if (value === undefined) return "–";
  return kind === "ms" ? value.toFixed(1) : format(value, "count");
}

/** Render `rows` into `section` (emptied when there are none). */
export function renderState(section, rows) {
  if (!rows.length) {
    section.replaceChildren();
    return;
  }
  section.replaceChildren(
    el("h2", {}, "State"),
    el("p", {class: "muted"}, "per task, its last checkpoint (alignment: first marker to last)"),
    el("table", {id: "state-table"}, [
      el("thead", {}, [el("tr", {}, [el("th", {}, "Instance"), el("th", {}, "Component"),
        ...STATE_COLUMNS.map(c => el("th", {class: "num"}, c.label))])]),
      el("tbody", {}, rows.map(row => el("tr", {"data-instance": row.instance,
                                                 "data-task": row.task ?? ""}, [
        el("td", {}, row.instance), el("td", {}, row.component),
        ...STATE_COLUMNS.map(c => el("td", {class: "num", "data-metric": c.key,
                                            "data-value": row.values[c.key]},
                                     show(row.values[c.key], c.kind)))])))]));
}
