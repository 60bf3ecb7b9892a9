"""The tracker's web UI in a real headless Chromium, against a real topology on Spark.

A word count (``ui_topology``: at-least-once, 240 sentences, then idle but RUNNING, beside a
spout that crashes once) runs on ``local[4]``; Chromium opens a login link, and the test checks
what a person would see: the topology listed as RUNNING, a logical-plan node per component, the
crash's traceback under exceptions, every instance of the physical plan with its pid, the
numbers of the components table equal to the tracker's ``/topologies/metrics`` (exactly: once
every sentence is acked the counters stop moving), the per-minute charts drawn, an
instance's log read through ``/topologies/container/filedata``, and the Deactivate / Activate
buttons taking the topology to PAUSED and back to RUNNING.
A full-page screenshot goes to ``build/screenshots/topology.png``. Two more topologies check the
per-task tables: a stateful count's State table (``ui_state_topology``) and an event-time
topology's Event time table (``ui_event_time_topology``), each against the tracker's figures.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them): without them
the test is skipped, or fails under ``CI=true``.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import ui_topology as topo

from heron_spark import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tracker.auth import tracker_token

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000"]
SCREENSHOT = Path(__file__).resolve().parent.parent / "build" / "screenshots" / "topology.png"
COMPONENTS = {"sentences", "split", "count", "crasher"}
COUNT_COLUMNS = ["emit-count", "execute-count", "ack-count", "fail-count"]
ALL_TIME = -1  # the table's default window: since the topology started


def _browser(*flags: str):
    """A headless Chromium under chromedriver with a fresh profile; skip (or fail in CI).

    ``flags``: more command-line switches (the HTTPS test's key pin).
    """
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    if missing:
        reason = (f"the UI browser test needs {', '.join(missing)}; install Debian's chromium "
                  f"and chromium-driver (.ci/run does)")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, *flags):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='heron-ui-chromium-')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


class Tracker:
    """The tracker's JSON API as a script uses it: Bearer token, Heron's query parameters."""

    def __init__(self, base: str, token: str, context: ssl.SSLContext | None = None) -> None:
        self.base = base.rstrip("/")
        self.token = token
        self.context = context  # https: trusting the topology's CA only
        self.ids: dict = {}

    def get(self, route: str, **params):
        return json.loads(self.get_text(route, **params))

    def get_text(self, route: str, **params) -> str:
        query = urllib.parse.urlencode({**self.ids, **params}, doseq=True)
        request = urllib.request.Request(f"{self.base}{route}?{query}",
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10, context=self.context) as response:
            return response.read().decode()

    def component_counts(self, component: str, names: dict[str, list[str]]) -> dict[str, float]:
        """Sum each column's metrics over instances and streams, as the table does."""
        answer = self.get("/topologies/metrics", component=component, interval=ALL_TIME,
                          metricname=[n for ns in names.values() for n in ns])
        metrics = answer["metrics"]
        return {key: sum(float(v) for n in ns for v in metrics.get(n, {}).values())
                for key, ns in names.items() if any(n in metrics for n in ns)}


def _metric_names(component: str) -> dict[str, list[str]]:
    """Heron's metric names of the UI table's count columns, for ``ui_topology``'s plan."""
    if component in ("sentences", "crasher"):
        stream = "default" if component == "sentences" else "unused"
        return {"emit-count": [f"__emit-count/{stream}"], "ack-count": [f"__ack-count/{stream}"],
                "fail-count": [f"__fail-count/{stream}"]}
    source = {"split": "sentences", "count": "split"}[component]
    names = {key: [f"__{key}/{source}/default"]
             for key in ("execute-count", "ack-count", "fail-count")}
    if component == "split":
        names["emit-count"] = ["__emit-count/default"]
    return names


def _table(driver) -> dict[str, dict[str, float]]:
    """The components table as shown: {component: {column: value}} from data-value."""
    rows = driver.execute_script("""
        const out = {};
        for (const tr of document.querySelectorAll('#metrics-table tbody tr[data-component]')) {
          const row = out[tr.dataset.component] = {};
          for (const td of tr.querySelectorAll('td[data-metric][data-value]')) {
            row[td.dataset.metric] = Number(td.dataset.value);
          }
        }
        return out;""")
    return {c: {k: v for k, v in row.items() if k in COUNT_COLUMNS} for c, row in rows.items()}


def _screenshot(driver, path: Path) -> Path:
    """Write a full-page PNG (beyond the viewport) through Chromium's DevTools protocol."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot",
                                  {"format": "png", "captureBeyondViewport": True})
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def _read(driver, script: str, *args):
    """Run ``script`` in the page and return its value: one atomic read of the DOM (the page
    re-renders its sections every few seconds, which makes element handles go stale)."""
    return driver.execute_script(script, *args)


def _text(driver, css: str) -> str | None:
    """The text of the first element matching ``css`` now, or None."""
    return _read(driver, "return document.querySelector(arguments[0])?.innerText ?? null", css)


def _attrs(driver, css: str, name: str) -> list[str]:
    """Attribute ``name`` of every element matching ``css`` now."""
    return _read(driver, "return [...document.querySelectorAll(arguments[0])]"
                         ".map(e => e.getAttribute(arguments[1]))", css, name)


def _click(driver, css: str, timeout: float = 10) -> None:
    """Click the element matching ``css``, again if a re-render replaced it mid-click."""
    from selenium.common.exceptions import (NoSuchElementException,
                                            StaleElementReferenceException)

    def attempt() -> bool:
        try:
            driver.find_element("css selector", css).click()
            return True
        except (StaleElementReferenceException, NoSuchElementException):
            return False
    wait_until(attempt, timeout, message=f"a click on {css}")


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _open_topology(driver, handle, hconf, name: str,
                   context: ssl.SSLContext | None = None) -> Tracker:
    """Log in through the handle's link, see ``name`` RUNNING in the list and open its page.

    Return a tracker client whose query ids (cluster, environ, role) name the topology.
    """
    link = handle.ui_link()
    base = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(link))
    tracker = Tracker(base, tracker_token(open_state_manager(hconf["heron.statemgr"])), context)
    driver.get(link)
    row = f'tr[data-topology="{name}"]'
    wait_until(lambda: _text(driver, f"{row} [data-state]"), 30, message="the topology in the list")
    assert _text(driver, f"{row} [data-state]") == "RUNNING"
    (cluster, environs), = tracker.get("/topologies/states").items()
    (environ, topologies), = environs.items()
    tracker.ids = {"cluster": cluster, "environ": environ, "topology": name}
    if topologies[name].get("role"):
        tracker.ids["role"] = topologies[name]["role"]
    _click(driver, f"{row} a")
    return tracker


def test_ui_shows_a_running_topology_as_the_tracker_reports_it(spark, tmp_path, hconf):
    driver = _browser()
    name = "ui_word_count"
    handle = submit(topo.topology(name, tmp_path), spark=spark.session, conf=hconf,
                    master="local[4]")
    try:
        assert handle.wait_running(120), handle.status_detail()
        # The list: this topology, RUNNING; its ids are the API's query parameters.
        tracker = _open_topology(driver, handle, hconf, name)

        # Every component in the table and as a node of the logical plan graph.
        def shown(css: str) -> set[str]:
            return set(_attrs(driver, css, "data-component"))
        wait_until(lambda: shown("#metrics-table tbody tr[data-component]") == COMPONENTS, 30,
                   message="a table row per component")
        wait_until(lambda: shown("#logical g.node[data-component]") == COMPONENTS, 10,
                   message="a graph node per component")
        # sentences -> split -> count; the crasher feeds nothing
        assert len(_attrs(driver, "#logical g.edgePath", "class")) == 2

        # The crash, with its traceback, as /topologies/exceptions reports it.
        crash_css = '#exceptions details[data-component="crasher"]'
        wait_until(lambda: _attrs(driver, crash_css, "data-instance"), 60,
                   message="the crasher's exception in the UI")
        (reported,) = tracker.get("/topologies/exceptions", component="crasher")
        assert topo.CRASH_MESSAGE in reported["stacktrace"]
        assert "Traceback" in reported["stacktrace"]
        assert _attrs(driver, crash_css, "data-instance") == [reported["instance_id"]]
        _click(driver, f"{crash_css} summary")  # unfold the traceback (kept open on refresh)
        shown_trace = wait_until(lambda: _text(driver, f"{crash_css}[open] pre"), 10,
                                 message="the unfolded traceback")
        assert reported["stacktrace"].strip().splitlines()[-1] in shown_trace
        assert "Traceback" in shown_trace

        # Every instance of the physical plan, with its pid (the crasher's is its restart's).
        def instances_shown() -> dict[str, str]:
            return _read(driver, """return Object.fromEntries([...document.querySelectorAll(
                '#physical tr[data-instance]')].map(tr => [tr.dataset.instance,
                tr.querySelector('[data-field=pid]').textContent]))""")
        plan = tracker.get("/topologies/physicalplan")
        instances = plan["instances"]
        assert len(instances) == 6 and all(inst["pid"] > 0 for inst in instances.values())
        wait_until(lambda: instances_shown() == {i: str(inst["pid"]) for i, inst in
                                                 instances.items()}, 10,
                   message=f"the physical plan's instances and pids {instances}")

        # Numbers: once every sentence is acked the counters stop, so table == API exactly.
        words = topo.total_words()
        expected = {"sentences": {"emit-count": topo.LINES, "ack-count": topo.LINES,
                                  "fail-count": 0},
                    "split": {"execute-count": topo.LINES, "ack-count": topo.LINES,
                              "fail-count": 0, "emit-count": words},
                    "count": {"execute-count": words, "ack-count": words, "fail-count": 0}}

        def api_counts() -> dict:
            return {c: tracker.component_counts(c, _metric_names(c)) for c in COMPONENTS}
        def word_count(counts: dict) -> dict:
            return {c: v for c, v in counts.items() if c in expected}
        wait_until(lambda: word_count(api_counts()) == expected, 90,
                   message=f"the tracker's counters to reach {expected}")
        # Every component, the crasher's too (its zeros appear once its restart publishes);
        # the table refreshes every 5 s, so wait for it to catch up with the settled API.
        wait_until(lambda: _table(driver) == api_counts(), 30,
                   message="the table to show the tracker's counters")
        assert word_count(_table(driver)) == expected
        (rate,) = _attrs(driver, '#metrics-table tr[data-component="split"] '
                                 'td[data-metric=execute-rate]', "data-value")
        assert float(rate) > 0

        # Charts: /metrics/timeline's points handed to Graph2d, which draws them on a later
        # animation frame.
        wait_until(lambda: int((_attrs(driver, "[data-chart=counts]", "data-points") or ["0"])[0]
                               or 0) > 0, 90, message="points in the counts chart")
        wait_until(lambda: _attrs(driver, "[data-chart=counts] .vis-line-graph "
                                          ".series-emit-count.vis-point", "class"), 10,
                   message="Graph2d to draw the counts chart's points")

        # An instance's log, opened from the physical plan.
        count_task = next(i for i, inst in instances.items() if inst["name"] == "count")
        _click(driver, f'button[data-log="{count_task}"]')
        log_css = f'#log-text[data-instance="{count_task}"]'
        wait_until(lambda: topo.READY_LINE in (_text(driver, log_css) or ""), 20,
                   message=f"{count_task}'s log in the log view")
        inst = instances[count_task]
        tail = tracker.get("/topologies/container/filedata", container=inst["container"],
                           path=inst["logfile_path"], offset=0, length=1 << 16)
        assert f"{topo.READY_LINE} {inst['task_id']}" in tail["data"]
        assert f"{topo.READY_LINE} {inst['task_id']}" in _text(driver, log_css)

        assert _errors(driver) == []
        print(f"\nscreenshot: {_screenshot(driver, SCREENSHOT)}")

        # Management: Deactivate, then Activate, through the page's buttons (POST verbs).
        for verb, state in (("deactivate", "PAUSED"), ("activate", "RUNNING")):
            _click(driver, f"button[data-verb={verb}]:not([disabled])")
            wait_until(lambda state=state: tracker.get("/topologies/executionstate")["status"]
                       == state, 60, message=f"the tracker to report {state} after {verb}")
            wait_until(lambda state=state: _text(driver, "#summary [data-state]") == state, 20,
                       message=f"the page to show {state} after {verb}")
        assert _errors(driver) == []
    finally:
        driver.quit()
        handle.kill()


def _served_certificate(url: str, context: ssl.SSLContext) -> bytes:
    """Return the certificate (PEM) the tracker at ``url`` serves, verified with ``context``."""
    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw, \
            context.wrap_socket(raw) as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


def test_ui_over_https_trusting_the_topology_ca(spark, tmp_path, hconf):
    """TLS on: the UI loads over ``https://`` in Chromium trusting exactly the tracker's key.

    The test trusts the topology's CA (``heron-spark ui --ca-file``'s), checks the served
    certificate against it, then pins that certificate's public key in Chromium
    (``--ignore-certificate-errors-spki-list``: that key and nothing else); without the pin
    Chromium shows no page. The page shows the
    word count's settled counters exactly as the API reports them, and a POST verb works.
    """
    from heron_spark.tracker.service import topology_ca_pem
    from heron_spark.wire.tls import https_client_context, spki_sha256

    name = "ui_https"
    handle = submit(topo.topology(name, tmp_path), spark=spark.session,
                    conf={**hconf, "heron.tls.enabled": True}, master="local[4]")
    driver = None
    try:
        assert handle.wait_running(120), handle.status_detail()
        url = handle.tracker_url
        assert url is not None and url.startswith("https://"), url
        assert handle.ui_link().startswith(f"{url}/login?token=")
        with open_state_manager(hconf["heron.statemgr"]) as statemgr:
            ca_pem = topology_ca_pem(statemgr, name)
        assert ca_pem is not None and handle.tls_ca_pem() == ca_pem
        context = https_client_context(ca_pem)
        pin = spki_sha256(_served_certificate(url, context))
        driver = _browser()  # no pin: Chromium refuses the page (no system CA signed it)
        driver.get(handle.ui_link())
        assert f'data-topology="{name}"' not in driver.page_source
        assert driver.get_cookies() == []  # no session: the login request never got through
        driver.quit()
        driver = _browser(f"--ignore-certificate-errors-spki-list={pin}")
        tracker = _open_topology(driver, handle, hconf, name, context)
        assert driver.current_url.startswith("https://")
        wait_until(lambda: set(_attrs(driver, "#metrics-table tbody tr[data-component]",
                                      "data-component")) == COMPONENTS, 30,
                   message="a table row per component, over HTTPS")
        words = topo.total_words()
        expected = {"split": {"execute-count": topo.LINES, "ack-count": topo.LINES,
                              "fail-count": 0, "emit-count": words},
                    "count": {"execute-count": words, "ack-count": words, "fail-count": 0}}

        def api_counts() -> dict:
            return {c: tracker.component_counts(c, _metric_names(c)) for c in COMPONENTS}
        wait_until(lambda: {c: v for c, v in api_counts().items() if c in expected}
                   == expected, 90, message=f"the tracker's counters to reach {expected}")
        wait_until(lambda: _table(driver) == api_counts(), 30,
                   message="the table to show the tracker's counters (over HTTPS)")
        _click(driver, "button[data-verb=deactivate]:not([disabled])")  # a POST, cookie + CSRF
        wait_until(lambda: tracker.get("/topologies/executionstate")["status"] == "PAUSED", 60,
                   message="the tracker to report PAUSED after deactivate over HTTPS")
        assert _errors(driver) == []
    finally:
        if driver is not None:
            driver.quit()
        handle.kill()


def test_ui_from_the_tracker_in_container_0(spark, tmp_path, hconf):
    """Container placement: the login link (minted by container 0's TMaster) opens the UI served
    beside it, which lists the topology RUNNING and shows its components' live metrics."""
    from heron_spark.scheduler.remote import RemoteTMaster

    driver = _browser()
    name = "ui_container_0"
    handle = submit(topo.topology(name, tmp_path), spark=spark.session,
                    conf={**hconf, "heron.tmaster.placement": "container"}, master="local[4]")
    try:
        assert isinstance(handle._tmaster, RemoteTMaster)
        assert handle.wait_running(120), handle.status_detail()
        link = handle.ui_link()
        assert link.startswith(f"{handle.tracker_url}/login?token=")
        driver.get(link)
        row = f'tr[data-topology="{name}"]'
        wait_until(lambda: _text(driver, f"{row} [data-state]"), 30,
                   message="the topology in the list")
        assert _text(driver, f"{row} [data-state]") == "RUNNING"
        _click(driver, f"{row} a")
        wait_until(lambda: set(_attrs(driver, "#metrics-table tbody tr[data-component]",
                                      "data-component")) == COMPONENTS, 30,
                   message="a table row per component (live metrics from container 0)")
        assert not _errors(driver)
    finally:
        driver.quit()
        handle.kill()


def test_ui_shows_each_stateful_tasks_state_as_the_tracker_reports_it(spark, tmp_path, hconf):
    """The State table (effectively once): a row per stateful task.

    Its keys equal to the keys the task counted (its own tally, apart from the state), its
    figures equal to the tracker's ``/topologies/metrics`` for that instance, the alignment
    from the stmgrs'.
    """
    import ui_state_topology as state_topo

    driver = _browser()
    name = "ui_state_count"
    handle = submit(state_topo.topology(name, tmp_path), spark=spark.session, conf=hconf,
                    master="local[4]")
    try:
        assert handle.wait_running(120), handle.status_detail()
        tracker = _open_topology(driver, handle, hconf, name)

        instances = tracker.get("/topologies/physicalplan")["instances"]
        counters = {i: inst["task_id"] for i, inst in instances.items() if inst["name"] == "count"}

        def seen() -> dict[str, int]:
            files = {i: tmp_path / f"seen-{task}.json" for i, task in counters.items()}
            return {i: json.loads(f.read_text()) for i, f in files.items() if f.exists()}

        def api_keys() -> dict[str, float]:
            answer = tracker.get("/topologies/metrics", component="count", interval=ALL_TIME,
                                 metricname=["__state-keys"])
            return {i: float(v) for i, v in answer["metrics"].get("__state-keys", {}).items()}
        # Once the input is counted and checkpointed, the keys stop moving.
        wait_until(lambda: sum(seen().values()) == state_topo.KEYS and api_keys() == seen(), 90,
                   message=f"each counting task's published keys to equal its own tally {seen()}")

        def table() -> dict[str, dict[str, float]]:
            return _read(driver, """
                const out = {};
                for (const tr of document.querySelectorAll('#state-table tr[data-instance]')) {
                  const row = out[tr.dataset.instance] = {};
                  for (const td of tr.querySelectorAll('td[data-metric][data-value]')) {
                    row[td.dataset.metric] = Number(td.dataset.value);
                  }
                }
                return out;""")
        wait_until(lambda: {i: table().get(i, {}).get("keys") for i in counters} == seen(), 30,
                   message="the State table to show each task's keys")
        shown = table()
        assert set(shown) == set(counters) | {i for i, inst in instances.items()
                                              if inst["name"] == "keys"}
        answer = tracker.get("/topologies/metrics", component="count", interval=ALL_TIME,
                             metricname=["__state-bytes", "__checkpoint-uploaded-bytes"])
        for instance in counters:
            row = shown[instance]
            assert {"keys", "bytes", "pause", "upload", "alignment", "uploaded"} <= row.keys()
            assert "restore" not in row  # nothing was restored
            # memory state of the same keys and counts pickles to the same bytes every time
            assert row["bytes"] == float(answer["metrics"]["__state-bytes"][instance]) > 0
            assert row["uploaded"] == \
                float(answer["metrics"]["__checkpoint-uploaded-bytes"][instance])
            assert row["pause"] >= 0 and row["upload"] >= 0 and row["alignment"] >= 0
        # no task has a watermark (no event time): the Event time section stays hidden
        assert _read(driver, "const s = document.getElementById('event-time');"
                             "return [s.hidden, s.childElementCount]") == [True, 0]
        assert _errors(driver) == []
    finally:
        driver.quit()
        handle.kill()


def _event_time_table(driver) -> dict[str, dict]:
    """The Event time table as shown: {instance: {component, watermark, lag, late, text}}."""
    return _read(driver, """
        const out = {};
        for (const tr of document.querySelectorAll('#event-time-table tr[data-instance]')) {
          const row = out[tr.dataset.instance] = {component: tr.dataset.component};
          for (const td of tr.querySelectorAll('td[data-metric]')) {
            const value = td.getAttribute('data-value');
            row[td.dataset.metric] = value === null ? null : Number(value);
            row[td.dataset.metric + '_text'] = td.innerText;
          }
        }
        return out;""")


def test_ui_shows_each_tasks_watermark_lag_and_late_tuples_as_the_tracker_reports_them(
        spark, tmp_path, hconf):
    """The Event time table: a row per task with a watermark.

    Each spout task's watermark is its newest timestamp minus the lag, each bolt task's the
    minimum over the spout tasks (computed here from the timestamps the spout emits), shown as
    an ISO date-time in UTC; its lag and late tuples equal the tracker's ``/topologies/metrics``
    for that instance, the late tuples each task's own tally. The same figures are in
    ``/metrics`` (Prometheus: gauges and a counter) and ``handle.metrics()`` (per component:
    the slowest task's watermark, the late tuples summed).
    """
    import datetime
    import time

    import ui_event_time_topology as et

    driver = _browser()
    name = "ui_event_time"
    started_ms = int(time.time() * 1000)
    base = started_ms // 1000 * 1000
    handle = submit(et.topology(name, tmp_path, base), spark=spark.session, conf=hconf,
                    master="local[4]")
    try:
        assert handle.wait_running(120), handle.status_detail()
        tracker = _open_topology(driver, handle, hconf, name)
        instances = tracker.get("/topologies/physicalplan")["instances"]
        component_of = {i: inst["name"] for i, inst in instances.items()}
        spouts = {i: inst["task_id"] for i, inst in instances.items() if inst["name"] == "events"}
        bolts = {i: inst["task_id"] for i, inst in instances.items() if inst["name"] == "late"}
        # spout task index = its rank among the component's tasks (Heron's task index)
        index = {i: sorted(spouts.values()).index(task) for i, task in spouts.items()}
        expected = {i: et.spout_watermark(base, index[i]) for i in spouts}
        slowest = min(expected.values())
        expected.update(dict.fromkeys(bolts, slowest))

        def tallies() -> dict[str, int]:
            files = {i: tmp_path / f"late-{task}.json" for i, task in bolts.items()}
            return {i: json.loads(f.read_text()) for i, f in files.items() if f.exists()}

        def api(metric: str) -> dict[str, float]:
            out = {}
            for component in ("events", "late"):
                answer = tracker.get("/topologies/metrics", component=component,
                                     interval=ALL_TIME, metricname=[metric])
                out.update({i: float(v) for i, v in answer["metrics"].get(metric, {}).items()})
            return out
        # Once every tuple is processed the watermarks settle and the late counts stop moving.
        wait_until(lambda: api("__watermark") == expected, 90,
                   message=f"each task's watermark to settle at {expected}: {api('__watermark')}")
        wait_until(lambda: sum(tallies().values()) == et.LATE_TOTAL
                   and api("__late-tuples") == {i: n for i, n in tallies().items() if n}, 60,
                   message=f"each bolt task's published late tuples to equal its tally {tallies()}")

        wait_until(lambda: {i: r.get("late") for i, r in _event_time_table(driver).items()}
                   == {**dict.fromkeys(spouts, 0), **dict.fromkeys(bolts, 0), **tallies()}, 30,
                   message="the Event time table to show each task's late tuples")
        shown = _event_time_table(driver)
        lags = api("__watermark-lag-ms")
        now_ms = time.time() * 1000
        assert set(shown) == set(spouts) | set(bolts)
        for instance, row in shown.items():
            assert row["component"] == component_of[instance]
            assert row["watermark"] == expected[instance]
            iso = datetime.datetime.fromtimestamp(expected[instance] / 1000, datetime.timezone.utc)
            assert row["watermark_text"] == \
                iso.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            # the lag: the wall clock when the task published minus its watermark, published
            # between the submit and now; the tracker's is as new as the table's or newer
            published_at = row["watermark"] + row["lag"]
            assert started_ms - 1 <= published_at <= now_ms + 1, (instance, row)
            assert row["lag"] <= lags[instance]
            number, unit = row["lag_text"].split()
            assert abs(float(number) * {"s": 1000, "ms": 1}[unit] - row["lag"]) <= 50, row

        text = tracker.get_text("/metrics")
        for family, kind in (("heron_watermark", "gauge"), ("heron_watermark_lag_ms", "gauge"),
                             ("heron_late_tuples", "counter")):
            assert f"# TYPE {family} {kind}\n" in text
        for instance, watermark in expected.items():
            assert _prometheus_sample(text, "heron_watermark", name, instance) == watermark
        for instance, late in tallies().items():
            assert _prometheus_sample(text, "heron_late_tuples", name, instance) == late

        _screenshot(driver, SCREENSHOT.with_name("event_time.png"))
        totals = handle.metrics()
        assert totals["events"]["__watermark"] == slowest
        assert totals["late"]["__watermark"] == slowest
        assert totals["late"]["__late-tuples"] == et.LATE_TOTAL
        assert _errors(driver) == []
    finally:
        driver.quit()
        handle.kill()


def _prometheus_sample(text: str, family: str, topology: str, instance: str) -> float | None:
    """The value of ``family``'s sample for ``instance`` of ``topology`` in ``text``, or None."""
    for line in text.splitlines():
        if line.startswith(family + "{") and f'topology="{topology}"' in line \
                and f'instance="{instance}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None
