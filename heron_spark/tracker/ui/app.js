// The page's entry point: hash routing (#/ = topologies, #/topology?... = one topology) and the
// refresh loop (every REFRESH_MS, and at once on navigation). Runs in the browser.
import {renderTopologies} from "./topologies.js";
import {TopologyView} from "./topology.js";

const REFRESH_MS = 5000;
const main = document.getElementById("main");
const errorBox = document.getElementById("error");
let view = null;
let timer = null;

function route() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#/topology?")) {
    const params = Object.fromEntries(new URLSearchParams(hash.slice("#/topology?".length)));
    if (!(view instanceof TopologyView) || view.key !== JSON.stringify(params)) {
      view = new TopologyView(main, params);
    }
  } else {
    view = {refresh: () => renderTopologies(main), key: "list"};
  }
  refresh();
}

async function refresh() {
  clearTimeout(timer);
  const current = view;
  try {
    await current.refresh();
    errorBox.hidden = true;
    document.getElementById("refreshed").textContent =
      `refreshed ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    errorBox.textContent = String(err.message || err);
    errorBox.hidden = false;
  }
  if (current === view) timer = setTimeout(refresh, REFRESH_MS);
}

window.addEventListener("hashchange", route);
route();
