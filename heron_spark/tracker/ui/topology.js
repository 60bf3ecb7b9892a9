// One topology: state, logical plan graph, physical plan, per-component metrics table, per-task
// state (effectively once), per-task event time (watermarks, late tuples), charts, exceptions
// and instance logs. `refresh()` re-fetches
// everything (called every few seconds); the graph is redrawn only when the plan changes.
// Runs in the browser.
import {get, post} from "./api.js";
import {ComponentCharts} from "./charts.js";
import {el} from "./dom.js";
import {drawLogicalPlan} from "./graph.js";
import {LogViewer, renderExceptions} from "./logs.js";
import {backpressure, COLUMNS, componentMetrics, format} from "./metrics.js";
import {renderPhysicalPlan} from "./physical.js";
import {eventTimeRows, renderEventTime} from "./event_time.js";
import {renderState, stateRows} from "./state.js";

/** Windows of the metrics table, in seconds; -1 is since the topology started (Heron's). */
export const INTERVALS = [[-1, "all time"], [600, "10 minutes"], [3600, "1 hour"],
                          [10800, "3 hours"]];

export class TopologyView {
  constructor(main, params) {
    this.key = JSON.stringify(params);
    this.topo = {cluster: params.cluster, environ: params.environ, role: params.role,
                 topology: params.topology};
    this.interval = -1;
    this.selected = null;
    this.planKey = null;
    this.busy = false;        // a management verb is in flight: its buttons are disabled
    this.verbResult = "";     // what the last verb answered, shown next to the buttons
    const section = (id, extra = {}) => el("section", {id, ...extra});
    this.parts = {
      head: section("summary"), logical: section("logical"), physical: section("physical"),
      metrics: section("metrics"), state: section("state"),
      eventTime: section("event-time", {hidden: true}), charts: section("charts"),
      exceptions: section("exceptions"), log: section("log", {hidden: true}),
    };
    this.charts = new ComponentCharts(this.parts.charts);
    this.logs = new LogViewer(this.parts.log, this.topo);
    main.replaceChildren(this.parts.head,
                         el("div", {class: "row"}, [this.parts.logical, this.parts.physical]),
                         this.parts.metrics, this.parts.state, this.parts.eventTime,
                         this.parts.charts,
                         this.parts.exceptions,
                         this.parts.log);
    document.getElementById("crumb").textContent = `/ ${params.topology}`;
  }

  async refresh() {
    const [state, logical, physical] = await Promise.all([
      get("/topologies/executionstate", this.topo), get("/topologies/logicalplan", this.topo),
      get("/topologies/physicalplan", this.topo)]);
    this.renderHead(state);
    const components = upstreamFirst(logical);
    const parallelism = Object.fromEntries(components.map(
      c => [c, ((physical.spouts || {})[c] || (physical.bolts || {})[c] || []).length]));
    const planKey = JSON.stringify([logical, parallelism]);
    if (planKey !== this.planKey) {
      this.planKey = planKey;
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      this.parts.logical.replaceChildren(el("h2", {}, "Logical plan"), svg);
      drawLogicalPlan(svg, logical, parallelism);
    }
    renderPhysicalPlan(this.parts.physical, physical,
                       (inst, stmgr) => this.logs.open(inst, stmgr).catch(err => {
                         this.parts.log.hidden = false;
                         this.parts.log.replaceChildren(el("p", {class: "error"},
                                                           String(err.message || err)));
                       }));
    if (!components.includes(this.selected)) this.selected = firstFeeding(logical, components);
    // Live views need a running TMaster (a FINISHED or KILLED topology has none): each part
    // that cannot load says why in place, and the plans above stay.
    const live = [[this.parts.metrics, () => this.renderMetrics(logical, components)],
                  [this.parts.state, async () => renderState(this.parts.state, await stateRows(
                    this.topo, physical, components, this.interval))],
                  [this.parts.eventTime, async () => renderEventTime(this.parts.eventTime,
                    await eventTimeRows(this.topo, physical, components, this.interval))],
                  [this.parts.exceptions, () => this.renderExceptions(components)],
                  [this.parts.charts, () => this.selected &&
                    this.charts.update(this.topo, logical, this.selected)]];
    await Promise.all(live.map(([part, load]) => load().catch(err => {
      if (part === this.parts.charts) this.charts.component = null;  // rebuilt next time
      part.hidden = false;  // a section hidden while empty shows its error
      part.replaceChildren(el("p", {class: "error"}, String(err.message || err)));
    })));
  }

  renderHead(state) {
    const status = String(state.status || "UNKNOWN").toUpperCase();
    const live = status === "RUNNING" || status === "PAUSED";
    const verb = (name, label, enabled, ask) => el("button", {
      "data-verb": name, disabled: !enabled || this.busy,
      onclick: () => (!ask || confirm(ask)) && this.manage(name)}, label);
    this.parts.head.replaceChildren(el("h2", {}, [
      `${this.topo.topology} `,
      el("span", {class: `state state-${status}`, "data-state": status}, status),
      el("span", {class: "muted"}, `  ${state.cluster ?? this.topo.cluster} / ` +
         `${state.environ ?? this.topo.environ} / ${state.role ?? this.topo.role ?? ""}`),
    ]), el("div", {class: "controls"}, [
      verb("deactivate", "Deactivate", status === "RUNNING"),
      verb("activate", "Activate", status === "PAUSED"),
      verb("restart", "Restart", live, `Restart every container of ${this.topo.topology}?`),
      el("span", {id: "verb-result", class: "muted"}, this.verbResult || ""),
    ]));
  }

  /** POST /topologies/<verb> (Heron's management verbs, through the tracker); refresh after. */
  async manage(verb) {
    this.busy = true;
    try {
      await post(`/topologies/${verb}`, this.topo);
      this.verbResult = `${verb}: done`;
    } catch (err) {
      this.verbResult = `${verb} failed: ${err.message || err}`;
    } finally {
      this.busy = false;
    }
    await this.refresh();
  }

  async renderMetrics(logical, components) {
    const interval = this.interval;
    const [rows, pressure] = await Promise.all([
      Promise.all(components.map(c => componentMetrics(this.topo, logical, c, interval))),
      backpressure(this.topo, components, interval).catch(() => ({}))]);
    const body = components.map((name, i) => {
      const values = {...rows[i].values};
      if (name in pressure) values.backpressure = pressure[name];
      return el("tr", {class: `clickable${name === this.selected ? " selected" : ""}`,
                       "data-component": name,
                       "data-kind": name in (logical.spouts || {}) ? "spout" : "bolt",
                       onclick: () => { this.selected = name; this.refresh(); }}, [
        el("td", {}, name), el("td", {}, name in (logical.spouts || {}) ? "spout" : "bolt"),
        ...COLUMNS.map(c => el("td", {class: "num", "data-metric": c.key,
                                      "data-value": values[c.key]},
                               format(values[c.key], c.kind)))]);
    });
    const select = el("select", {id: "interval", onchange: e => {
      this.interval = Number(e.target.value); this.refresh(); }},
    INTERVALS.map(([secs, label]) => el("option", {value: secs, selected: secs === interval},
                                        label)));
    this.parts.metrics.replaceChildren(
      el("h2", {}, "Components"),
      el("div", {class: "controls"}, ["Window: ", select,
        el("span", {class: "muted"}, "click a row for its charts")]),
      el("table", {id: "metrics-table", "data-interval": interval}, [
        el("thead", {}, [el("tr", {}, [el("th", {}, "Component"), el("th", {}, "Kind"),
          ...COLUMNS.map(c => el("th", {class: "num"}, c.label))])]),
        el("tbody", {}, body)]));
  }

  async renderExceptions(components) {
    const lists = await Promise.all(components.map(
      c => get("/topologies/exceptions", {...this.topo, component: c})));
    renderExceptions(this.parts.exceptions,
                     Object.fromEntries(components.map((c, i) => [c, lists[i] || []])));
  }
}

/** Component names, spouts first, then each bolt after every component it reads from (by
 * depth from the spouts; names break ties), as the table lists them. */
export function upstreamFirst(logical) {
  const depth = {};
  for (const name of Object.keys(logical.spouts || {})) depth[name] = 0;
  const bolts = Object.entries(logical.bolts || {});
  for (let round = 0; round <= bolts.length; round++) {   // longest path; a cycle stops here
    for (const [name, bolt] of bolts) {
      const inputs = (bolt.inputs || []).map(i => depth[i.component_name] ?? -1);
      depth[name] = Math.max(depth[name] ?? 1, 1 + Math.max(0, ...inputs));
    }
  }
  return Object.keys(depth).sort((a, b) => depth[a] - depth[b] || a.localeCompare(b));
}

/** The component charted until the user picks one: the first that feeds a bolt (a spout of
 * the main flow rather than a side one), else the first. */
function firstFeeding(logical, components) {
  const feeding = new Set(Object.values(logical.bolts || {}).flatMap(
    b => (b.inputs || []).map(i => i.component_name)));
  return components.find(c => feeding.has(c)) ?? components[0] ?? null;
}
