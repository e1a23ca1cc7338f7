// The JSON API beside the page: reads and the actions. The admin token, once entered, is
// kept in this tab's session storage and sent with every request (reads beyond loopback need it).

const TOKEN_KEY = "scheduler.adminToken";
/** How long a request may take before the node counts as not answering. */
const TIMEOUT_MS = 10000;

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // Who acts, for the audit trail (recorded with the token's name).
  if (method !== "GET") headers["X-Scheduler-Actor"] = "dashboard";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (e) {
    if (e.name === "TimeoutError") throw new ApiError(0, "timeout", `the node did not answer within ${TIMEOUT_MS / 1000} s`);
    throw new ApiError(0, "network", `the node does not answer (${e.message})`);
  }
  const value = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, value?.error ?? "http", value?.message ?? `HTTP ${response.status}`);
  }
  return value;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);
export const del = (path) => call("DELETE", path);
export const task = (name) => encodeURIComponent(name);
