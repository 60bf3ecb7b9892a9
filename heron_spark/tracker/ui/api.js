// Tracker client for the page: GET/POST against the tracker that served it (same origin, so the
// session cookie set by /login?token=... goes along). Runs in the browser.

/** Unwrap Heron's tracker envelope ({status, result, message, ...}) when there is one. */
function unwrap(body) {
  if (body && typeof body === "object" && "result" in body && "status" in body) {
    if (body.status !== "success") throw new Error(body.message || "tracker error");
    return body.result;
  }
  return body;
}

/** Build a query string; array values repeat the key (metricname=a&metricname=b), as Heron's. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null) continue;
    for (const v of Array.isArray(value) ? value : [value]) q.append(key, String(v));
  }
  return q.toString();
}

// The tracker refuses a cookie-authenticated POST without this header (CSRF guard).
const CSRF_HEADER = "X-Heron-Spark-Request";

async function call(method, path, params) {
  const headers = method === "GET" ? {} : {[CSRF_HEADER]: "1"};
  const response = await fetch(`${path}?${query(params)}`,
                               {method, headers, credentials: "same-origin"});
  const text = await response.text();
  let body;
  try { body = text ? JSON.parse(text) : null; } catch { body = text; }
  if (!response.ok) {
    const detail = (body && (body.message || body.detail)) || text || response.statusText;
    throw new Error(`${method} ${path}: ${response.status} ${detail}`);
  }
  return unwrap(body);
}

export const get = (path, params = {}) => call("GET", path, params);
export const post = (path, params = {}) => call("POST", path, params);
