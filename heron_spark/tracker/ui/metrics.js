// Heron's metric names for a component, and their per-component sums as the table and charts
// show them. Pure functions plus one fetch per component. Runs in the browser.
//
// Names (Heron's): spouts  __emit-count/<stream>, __ack-count/<stream>, __fail-count/<stream>,
// __complete-latency/<stream>; bolts  __execute-count/<src>/<stream>, __ack-count/<src>/<stream>,
// __fail-count/<src>/<stream>, __execute-latency/<src>/<stream>,
// __process-latency/<src>/<stream>, plus __emit-count/<stream> per output; the stmgrs
// (component __stmgr__) report __time_spent_back_pressure_by_compid/<component>. A KafkaSpout
// adds __kafka-lag/<topic>/<partition> (records behind the partition's end, last sample), whose
// names are known only once published: a name ending in "/*" stands for every metric of the
// component under that prefix, and a spout's metrics are then fetched all at once.
// Latencies are in nanoseconds, back pressure time in milliseconds, as in Heron.
import {get} from "./api.js";

export const STMGR_COMPONENT = "__stmgr__";

/** Columns: key -> how its metric names are built and how instance values combine. */
export const COLUMNS = [
  {key: "emit-count", label: "Emitted", kind: "count"},
  {key: "emit-rate", label: "Emit /s", kind: "rate", of: "emit-count"},
  {key: "execute-count", label: "Executed", kind: "count"},
  {key: "execute-rate", label: "Execute /s", kind: "rate", of: "execute-count"},
  {key: "ack-count", label: "Acked", kind: "count"},
  {key: "fail-count", label: "Failed", kind: "count"},
  {key: "execute-latency", label: "Execute latency ms", kind: "latency"},
  {key: "process-latency", label: "Process latency ms", kind: "latency"},
  {key: "complete-latency", label: "Complete latency ms", kind: "latency"},
  {key: "backpressure", label: "Back pressure ms", kind: "count"},
  {key: "kafka-lag", label: "Kafka lag", kind: "count"},
];

const ANY = "/*";

/** The metric names of `response` that `metric` stands for (itself, or those under a prefix). */
function expand(metric, metrics) {
  if (!metric.endsWith(ANY)) return [metric];
  const prefix = metric.slice(0, -1);
  return Object.keys(metrics).filter(name => name.startsWith(prefix));
}

function outputStreams(component) {
  return (component.outputs || []).map(o => o.stream_name ?? o.name ?? o);
}

/** {column key -> [metric names]} for one component of a Heron logical plan. */
export function metricNames(logicalPlan, name) {
  const spout = (logicalPlan.spouts || {})[name];
  const bolt = (logicalPlan.bolts || {})[name];
  const emits = outputStreams(spout || bolt || {}).map(s => `__emit-count/${s}`);
  if (spout) {
    const streams = outputStreams(spout);
    return {
      "emit-count": emits,
      "ack-count": streams.map(s => `__ack-count/${s}`),
      "fail-count": streams.map(s => `__fail-count/${s}`),
      "complete-latency": streams.map(s => `__complete-latency/${s}`),
      "kafka-lag": [`__kafka-lag${ANY}`],
    };
  }
  const inputs = (bolt?.inputs || []).map(i => `${i.component_name}/${i.stream_name}`);
  return {
    "emit-count": emits,
    "execute-count": inputs.map(i => `__execute-count/${i}`),
    "ack-count": inputs.map(i => `__ack-count/${i}`),
    "fail-count": inputs.map(i => `__fail-count/${i}`),
    "execute-latency": inputs.map(i => `__execute-latency/${i}`),
    "process-latency": inputs.map(i => `__process-latency/${i}`),
  };
}

/** Sum (counts) or average (latencies) a /topologies/metrics answer into {key -> number}. */
export function summarize(names, response) {
  const metrics = response?.metrics || {};
  const out = {};
  for (const [key, list] of Object.entries(names)) {
    const values = [];
    for (const metric of list.flatMap(m => expand(m, metrics))) {
      for (const value of Object.values(metrics[metric] || {})) values.push(Number(value));
    }
    if (!values.length) continue;
    const column = COLUMNS.find(c => c.key === key);
    const sum = values.reduce((a, b) => a + b, 0);
    out[key] = column?.kind === "latency" ? sum / values.length / 1e6 : sum;
  }
  return out;
}

/** Fetch one component's metrics over `interval` seconds (-1: since the topology started). */
export async function componentMetrics(topo, logicalPlan, name, interval) {
  const names = metricNames(logicalPlan, name);
  const wanted = Object.values(names).flat();
  const response = await get("/topologies/metrics", {  // no metricname: every metric
    ...topo, component: name, interval,
    metricname: wanted.some(m => m.endsWith(ANY)) ? undefined : wanted});
  const values = summarize(names, response);
  const seconds = Number(response?.interval) || 0;
  for (const column of COLUMNS.filter(c => c.kind === "rate")) {
    if (column.of in values && seconds > 0) values[column.key] = values[column.of] / seconds;
  }
  return {values, interval: response?.interval};
}

/** Back pressure time per component, summed over the stmgrs: {component -> ms}. */
export async function backpressure(topo, components, interval) {
  const metricname = components.map(c => `__time_spent_back_pressure_by_compid/${c}`);
  const response = await get("/topologies/metrics",
                             {...topo, component: STMGR_COMPONENT, interval, metricname});
  const out = {};
  for (const c of components) {
    const per = response?.metrics?.[`__time_spent_back_pressure_by_compid/${c}`];
    if (per) out[c] = Object.values(per).reduce((a, b) => a + Number(b), 0);
  }
  return out;
}

export function format(value, kind) {
  if (value === undefined) return "–";
  if (kind === "latency" || kind === "rate") return value.toFixed(kind === "rate" ? 1 : 3);
  return Math.round(value).toLocaleString("en-US");
}

/** Sum a /metrics/timeline answer ({timeline: {metric: {instance: {t: v}}}}) per minute:
 * {key -> [{x: ms, y: sum, n: values summed}]}, oldest first. */
export function timelineSeries(response, metricsByKey) {
  const series = {};
  const timeline = response?.timeline || {};
  for (const [key, list] of Object.entries(metricsByKey)) {
    const points = {};
    for (const metric of list) {
      for (const perInstance of Object.values(timeline[metric] || {})) {
        for (const [t, v] of Object.entries(perInstance)) {
          const point = points[t] || (points[t] = {x: Number(t) * 1000, y: 0, n: 0});
          point.y += Number(v);
          point.n += 1;
        }
      }
    }
    series[key] = Object.values(points).sort((a, b) => a.x - b.x);
  }
  return series;
}
