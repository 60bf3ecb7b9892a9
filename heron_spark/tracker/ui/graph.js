// The logical plan as a graph: one node per spout/bolt, one edge per input stream, laid out
// by dagre-d3 over d3 (the libraries Spark's DAG view uses, served from /vendor/). Browser.
/* global d3, dagreD3 */

/** Draw `logicalPlan` ({spouts, bolts: {name: {inputs: [{component_name, stream_name,
 * grouping}]}}}) into the <svg> `svg`; parallelism per component comes from `parallelism`. */
export function drawLogicalPlan(svg, logicalPlan, parallelism) {
  const g = new dagreD3.graphlib.Graph({multigraph: true}).setGraph({
    rankdir: "LR", nodesep: 30, ranksep: 60, marginx: 10, marginy: 10});
  const addNode = (name, kind) => g.setNode(name, {
    label: `${name} ×${parallelism[name] ?? "?"}`, class: kind, rx: 4, ry: 4,
    id: `node-${name}`});
  for (const name of Object.keys(logicalPlan.spouts || {})) addNode(name, "spout");
  for (const name of Object.keys(logicalPlan.bolts || {})) addNode(name, "bolt");
  for (const [name, bolt] of Object.entries(logicalPlan.bolts || {})) {
    for (const input of bolt.inputs || []) {
      const label = input.stream_name === "default" ? input.grouping
        : `${input.stream_name} · ${input.grouping}`;
      g.setEdge(input.component_name, name, {label, curve: d3.curveBasis},
                `${input.component_name}/${input.stream_name}`);
    }
  }
  const root = d3.select(svg);
  root.selectAll("*").remove();
  const inner = root.append("g");
  new dagreD3.render()(inner, g);
  root.selectAll("g.node").each(function (name) {
    this.setAttribute("data-component", name);
  });
  const {width, height} = g.graph();
  root.attr("viewBox", `0 0 ${Math.max(width, 1)} ${Math.max(height, 1)}`);
}
