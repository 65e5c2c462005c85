// The JSON API (/api/...): requests with the session's CSRF token, answers
// parsed, failures as `ApiFailure` (status and body). A 401 means the
// session ended: the page is drawn again, which shows the login page.

import { redraw } from "./nav.js";

let csrf = null;

export class ApiFailure extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export function hasSession() {
  return csrf !== null;
}

// The CSRF token of the session just opened (null when it closed).
export function setSession(token) {
  csrf = token;
}

// A JSON request (`body` sent as JSON when given); the answer parsed.
export function api(method, path, body) {
  return request(method, path, body === undefined ? undefined : JSON.stringify(body), "application/json");
}

// A POST of plain text (a job file to import); the answer parsed.
export function postText(path, text) {
  return request("POST", path, text, "text/plain; charset=utf-8");
}

async function request(method, path, body, contentType) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = contentType;
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  const res = await fetch(path, { method, headers, body, credentials: "same-origin" });
  const text = await res.text();
  let data;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = text; }
  // Not for the login itself, whose 401 is a wrong password for its form.
  if (res.status === 401 && path !== "/api/login") { csrf = null; redraw(); throw new ApiFailure(401, data); }
  if (!res.ok) throw new ApiFailure(res.status, data);
  return data;
}
