// Event time per task: one row per instance that has a watermark, from the task metrics every
// task publishes once it has one: __watermark (ms since the epoch; a spout's is its newest
// timestamp minus its lag, a bolt's the minimum over its upstream tasks), __watermark-lag-ms
// (the wall clock when it published minus that watermark) and __late-tuples (the tuples it
// counted late, a counter: summed over the chosen window). A topology without event time shows
// nothing (the section is hidden). Runs in the browser.
import {get} from "./api.js";
import {el} from "./dom.js";
import {format} from "./metrics.js";

export const WATERMARK = "__watermark";
export const WATERMARK_LAG = "__watermark-lag-ms";
export const LATE_TUPLES = "__late-tuples";
/** WATERMARK_MAX (2**63 - 1, end of input) as the tracker's doubles carry it. */
export const END_OF_INPUT = 2 ** 63;

/** Rows [{instance, task, component, watermark, lag, late}] of the tasks of `components` that
 * have a watermark, from /topologies/metrics of each component (lag: undefined once the input
 * ended; late: 0 when the task never counted one, as it publishes none then). */
export async function eventTimeRows(topo, physical, components, interval) {
  const answers = await Promise.all(components.map(c => get("/topologies/metrics", {
    ...topo, component: c, interval, metricname: [WATERMARK, WATERMARK_LAG, LATE_TUPLES]})));
  const instances = physical.instances || {};
  const rows = [];
  components.forEach((component, i) => {
    const metrics = answers[i]?.metrics || {};
    const ids = Object.keys(metrics[WATERMARK] || {}).sort(
      (a, b) => a.localeCompare(b, "en", {numeric: true}));
    for (const id of ids) {
      const watermark = Number(metrics[WATERMARK][id]);
      const lag = metrics[WATERMARK_LAG]?.[id];
      rows.push({instance: id, task: instances[id]?.task_id, component, watermark,
                 lag: lag === undefined || watermark >= END_OF_INPUT ? undefined : Number(lag),
                 late: Number(metrics[LATE_TUPLES]?.[id] ?? 0)});
    }
  });
  return rows;
}

/** A watermark as an ISO 8601 date-time in UTC with milliseconds, or "end of input". */
export function showWatermark(ms) {
  if (ms >= END_OF_INPUT) return "end of input";
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}

/** A lag in ms: "850 ms" below a second, "12.3 s" from there. */
export function showLag(ms) {
  if (ms === undefined) return "–";
  return Math.abs(ms) < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Render `rows` into `section`: hidden when there are none. */
export function renderEventTime(section, rows) {
  section.hidden = !rows.length;
  if (!rows.length) {
    section.replaceChildren();
    return;
  }
  section.replaceChildren(
    el("h2", {}, "Event time"),
    el("p", {class: "muted"}, "per task: its watermark (UTC), how far it trails the wall " +
                              "clock, and the tuples it counted late in the window"),
    el("table", {id: "event-time-table"}, [
      el("thead", {}, [el("tr", {}, [el("th", {}, "Instance"), el("th", {}, "Component"),
        el("th", {}, "Watermark"), el("th", {class: "num"}, "Watermark lag"),
        el("th", {class: "num"}, "Late tuples")])]),
      el("tbody", {}, rows.map(row => el("tr", {"data-instance": row.instance,
                                                 "data-task": row.task ?? "",
                                                 "data-component": row.component}, [
        el("td", {}, row.instance), el("td", {}, row.component),
        el("td", {"data-metric": "watermark", "data-value": row.watermark},
           showWatermark(row.watermark)),
        el("td", {class: "num", "data-metric": "lag", "data-value": row.lag}, showLag(row.lag)),
        el("td", {class: "num", "data-metric": "late", "data-value": row.late},
           format(row.late, "count"))])))]));
}
