// Exceptions (per component, with tracebacks) and an instance's log file read in pages through
// /topologies/container/filedata (Heron's offset/length slices). Runs in the browser.
import {get} from "./api.js";
import {el} from "./dom.js";
import {containerOf} from "./physical.js";

export const LOG_PAGE_BYTES = 16384;

/** Render every component's exceptions ({component: [Heron ExceptionLog]}) into `section`. */
export function renderExceptions(section, byComponent) {
  const open = new Set([...section.querySelectorAll("details[open]")].map(d => d.dataset.key));
  const items = [];
  for (const [component, list] of Object.entries(byComponent)) {
    for (const e of list) {
      const key = `${e.instance_id}|${firstLine(e.stacktrace)}`;
      items.push(el("details", {"data-component": component, "data-instance": e.instance_id,
                                "data-key": key, open: open.has(key), class: "exception"}, [
        el("summary", {}, `${e.instance_id} · ${e.count}× · last ${e.lasttime} · ` +
           `${firstLine(e.stacktrace)}`),
        el("pre", {}, [e.logging ? `${e.logging}\n\n` : "", e.stacktrace]),
      ]));
    }
  }
  section.replaceChildren(el("h2", {}, `Exceptions (${items.length})`),
                          ...(items.length ? items : [el("p", {class: "muted"}, "None.")]));
}

function firstLine(text) {
  const lines = String(text || "").trim().split("\n");
  return lines[lines.length - 1];
}

/** The path /container/filedata wants for an instance's log: its `logfile_path`, else the
 * `path` parameter of its `logfile` URL (or `logfile` itself when it is a plain path). */
export function logPath(instance) {
  if (instance.logfile_path) return instance.logfile_path;
  const file = String(instance.logfile || "");
  if (/^[a-z]+:\/\//i.test(file) || file.startsWith("/topologies/")) {
    const url = new URL(file, location.href);
    return url.searchParams.get("path") || url.pathname;
  }
  return file;
}

/** A log viewer for one instance: the last page first, then older / newer pages. */
export class LogViewer {
  constructor(section, topo) {
    this.section = section;
    this.topo = topo;
    this.instance = null;
  }

  async open(instance, stmgr) {
    this.instance = instance;
    this.container = instance.container ?? containerOf(instance.stmgr_id || stmgr.id);
    this.path = logPath(instance);
    const size = await this.slice(-1, 0);   // Heron: offset -1 answers the file's size
    this.size = Number(size.offset) || 0;
    await this.show(Math.max(0, this.size - LOG_PAGE_BYTES));
  }

  slice(offset, length) {
    return get("/topologies/container/filedata", {
      ...this.topo, container: this.container, path: this.path, offset, length});
  }

  async show(offset) {
    const chunk = await this.slice(offset, LOG_PAGE_BYTES);
    this.offset = Number(chunk.offset ?? offset);
    const end = this.offset + Number(chunk.length ?? (chunk.data || "").length);
    this.size = Math.max(this.size, end);
    const page = (label, target, enabled) => el("button", {
      "data-page": label, disabled: !enabled, onclick: () => this.show(target).catch(err => {
        this.section.querySelector(".controls").append(
          el("span", {class: "error"}, String(err.message || err)));
      })}, label);
    this.section.replaceChildren(
      el("h2", {}, `Log of ${this.instance.id}`),
      el("div", {class: "controls"}, [
        page("older", Math.max(0, this.offset - LOG_PAGE_BYTES), this.offset > 0),
        page("newer", end, end < this.size),
        page("latest", Math.max(0, this.size - LOG_PAGE_BYTES), true),
        el("span", {class: "muted"}, `${this.path} · bytes ${this.offset}–${end} of ${this.size}`),
      ]),
      el("pre", {id: "log-text", "data-instance": this.instance.id,
                 "data-offset": this.offset}, chunk.data || ""),
    );
    this.section.hidden = false;
    const text = this.section.querySelector("#log-text");
    if (end >= this.size) text.scrollTop = text.scrollHeight;  // the tail: show its last lines
  }
}
