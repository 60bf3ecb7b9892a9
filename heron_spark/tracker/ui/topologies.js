// The list of topologies with their state, from the tracker's /topologies/states
// ({cluster: {environ: {name: execution state}}}). Runs in the browser.
import {get, query} from "./api.js";
import {el} from "./dom.js";

/** Flatten /topologies/states into rows {cluster, environ, role, name, status}. */
export function topologyRows(states) {
  const rows = [];
  for (const [cluster, environs] of Object.entries(states || {})) {
    for (const [environ, topologies] of Object.entries(environs)) {
      for (const [name, state] of Object.entries(topologies)) {
        rows.push({cluster, environ, name, role: state.role,
                   status: String(state.status || "UNKNOWN").toUpperCase(),
                   submitted: state.submission_time});
      }
    }
  }
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

export function topologyHash(row) {
  return "#/topology?" + query({cluster: row.cluster, environ: row.environ, role: row.role,
                                topology: row.name});
}

export async function renderTopologies(main) {
  const rows = topologyRows(await get("/topologies/states"));
  document.getElementById("crumb").textContent = "topologies";
  const body = rows.map(row => el("tr", {"data-topology": row.name}, [
    el("td", {}, [el("a", {href: topologyHash(row)}, row.name)]),
    el("td", {}, [el("span", {class: `state state-${row.status}`, "data-state": row.status},
                     row.status)]),
    el("td", {}, row.cluster), el("td", {}, row.environ), el("td", {}, row.role || ""),
    el("td", {}, row.submitted ? new Date(row.submitted * 1000).toLocaleString() : ""),
  ]));
  main.replaceChildren(el("section", {id: "topologies"}, [
    el("h2", {}, `Topologies (${rows.length})`),
    rows.length ? el("table", {}, [
      el("thead", {}, [el("tr", {}, ["Name", "State", "Cluster", "Environ", "Role", "Submitted"]
        .map(h => el("th", {}, h)))]),
      el("tbody", {}, body)]) : el("p", {class: "muted"}, "No topologies."),
  ]));
}
