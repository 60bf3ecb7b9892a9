// The physical plan: containers -> stream manager -> instances, with pids and a log link per
// instance. Input is Heron's /topologies/physicalplan shape. Runs in the browser.
import {el} from "./dom.js";

/** The container index of a stmgr id ("stmgr-3" -> "3"), as /container/filedata wants it. */
export function containerOf(stmgrId) {
  return String(stmgrId).replace(/^stmgr-/, "");
}

/** Render the plan into `section`; `onLog(instance)` opens an instance's log. */
export function renderPhysicalPlan(section, plan, onLog) {
  const stmgrs = Object.values(plan.stmgrs || {}).sort(
    (a, b) => String(a.id).localeCompare(String(b.id), "en", {numeric: true}));
  const blocks = stmgrs.map(stmgr => {
    const ids = (stmgr.instance_ids || Object.values(plan.instances || {})
      .filter(i => i.stmgr_id === stmgr.id).map(i => i.id))
      .slice().sort((a, b) => a.localeCompare(b, "en", {numeric: true}));
    const rows = ids.map(id => {
      const inst = plan.instances[id] || {id};
      return el("tr", {"data-instance": id, "data-component": inst.name}, [
        el("td", {}, id), el("td", {}, inst.name || ""),
        el("td", {class: "num", "data-field": "pid"}, inst.pid ?? ""),
        el("td", {}, [el("button", {"data-log": id, onclick: () => onLog(inst, stmgr)},
                         "log")]),
      ]);
    });
    return el("div", {class: "container", "data-container": containerOf(stmgr.id)}, [
      el("h3", {}, `container ${containerOf(stmgr.id)} · ${stmgr.id} on ${stmgr.host}:` +
         `${stmgr.port} · pid ${stmgr.pid ?? "?"}`),
      el("table", {}, [
        el("thead", {}, [el("tr", {}, ["Instance", "Component", "Pid", ""].map(
          (h, i) => el("th", {class: i === 2 ? "num" : null}, h)))]),
        el("tbody", {}, rows)]),
    ]);
  });
  section.replaceChildren(el("h2", {}, `Physical plan (${stmgrs.length} containers, ` +
                                        `${Object.keys(plan.instances || {}).length} instances)`),
                          ...(blocks.length ? blocks : [el("p", {class: "muted"},
                                                           "No physical plan yet.")]));
}
