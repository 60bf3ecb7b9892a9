// Per-minute charts of a component's counters and latencies from /topologies/metrics/timeline,
// drawn with vis-timeline-graph2d's Graph2d (served from /vendor/). Runs in the browser.
/* global vis */
import {get} from "./api.js";
import {el} from "./dom.js";
import {COLUMNS, metricNames, timelineSeries} from "./metrics.js";

export const WINDOW_SECS = 30 * 60;

const CHARTS = [
  {id: "counts", title: "Tuples per minute", kind: "count"},
  {id: "latency", title: "Latency per minute (ms, average of instances)", kind: "latency"},
];

/** Charts for one component; `update` fetches the last WINDOW_SECS and redraws in place. */
export class ComponentCharts {
  constructor(section) {
    this.section = section;
    this.graphs = {};     // chart id -> {graph, items, groups} (vis DataSets, updated in place)
    this.component = null;
  }

  async update(topo, logicalPlan, component) {
    if (component !== this.component) this.reset(component);
    const names = metricNames(logicalPlan, component);
    const end = Math.floor(Date.now() / 1000);
    const response = await get("/topologies/metrics/timeline", {
      ...topo, component, starttime: end - WINDOW_SECS, endtime: end,
      metricname: Object.values(names).flat()});
    const series = timelineSeries(response, names);
    // The x range: from a minute before the first point (within the window) to now, so a
    // young topology's few minutes fill the chart instead of its right edge.
    const first = Math.min(...Object.values(series).flat().map(p => p.x / 1000), end);
    const start = Math.max(end - WINDOW_SECS, Math.min(first - 60, end - 300));
    for (const chart of CHARTS) {
      const keys = COLUMNS.filter(c => c.kind === chart.kind && series[c.key]?.length);
      const items = keys.flatMap(c => series[c.key].map(p => ({   // latency: ns -> ms, mean
        x: p.x, y: chart.kind === "latency" ? p.y / p.n / 1e6 : p.y, group: c.key})));
      // A fixed class per metric: the same colour on every refresh (Graph2d numbers new
      // groups otherwise) and a hook for tests (.series-<key>).
      const groups = keys.map(c => ({id: c.key, content: c.label, className:
        `vis-graph-group${COLUMNS.indexOf(c) % 10} series-${c.key}`}));
      this.draw(chart, groups, items, start, end);
    }
  }

  reset(component) {
    for (const drawn of Object.values(this.graphs)) drawn.graph.destroy();
    this.graphs = {};
    this.component = component;
    this.section.replaceChildren(el("h2", {}, `${component}: per minute, ` +
                                             `last ${WINDOW_SECS / 60} minutes at most`),
      ...CHARTS.map(c => el("div", {class: "chart", "data-chart": c.id}, [
        el("h3", {}, c.title), el("div", {id: `chart-${c.id}`})])));
  }

  draw(chart, groups, items, start, end) {
    const box = this.section.querySelector(`#chart-${chart.id}`);
    box.parentElement.setAttribute("data-points", items.length);
    let drawn = this.graphs[chart.id];
    if (!drawn) {
      drawn = this.graphs[chart.id] = {items: new vis.DataSet(), groups: new vis.DataSet()};
      drawn.graph = new vis.Graph2d(box, drawn.items, drawn.groups, {
        height: "180px", legend: {enabled: true, left: {position: "top-left"}},
        drawPoints: {size: 4}, shaded: false, interpolation: false,
        dataAxis: {left: {range: {min: 0}}}, moveable: false, zoomable: false});
    }
    drawn.groups.clear();
    drawn.groups.add(groups);
    drawn.items.clear();
    drawn.items.add(items);
    drawn.graph.setWindow(start * 1000, end * 1000, {animation: false});
  }
}
