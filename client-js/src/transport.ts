/**
 * HTTP to the collector (client/transport.py, the same promises): one total deadline per
 * call (`timeoutMs`: connecting, every read and every redirect followed), redirects followed
 * only within the collector's origin (307/308 for a POST, at most 5), and every answer
 * classified, including the ones retrying alone will not get past (a refused token, a
 * redirect not followed, an answer that is not the collector's).
 */

/** Statuses worth retrying besides 5xx: request timeout, too many requests. */
const RETRYABLE_4XX = new Set([408, 429]);
const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** The redirects that keep a POST a POST with its body (RFC 9110, 15.4.8 and 15.4.9). */
const KEEPS_METHOD = new Set([307, 308]);
/** The collector's own error fields for a request at the wrong place (its 404 and 405). */
const URL_FIELDS = new Set(["path", "method"]);
const TOKEN_STATUSES = new Set([401, 403]);

export type DeliveryKind = "token_refused" | "redirect_not_followed" | "collector_url" | "reports_refused";

/** What each delivery error the app is told about is; see LdptelError in errors.ts. */
export interface Problem {
  kind: DeliveryKind;
  field: string;
  reason: string;
  httpStatus: number | null;
}

export type Verdict = "delivered" | "retry" | "reject" | "too_large" | "token";

export interface Outcome {
  verdict: Verdict;
  status: number | null;
  reason: string;
  retryAfter: number | null;
  problem: Problem | null;
}

/** Retry-After as seconds from now: delta-seconds or an HTTP-date; null if absent/bad. */
export function parseRetryAfter(value: string | null): number | null {
  if (!value) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const when = Date.parse(text);
  return Number.isFinite(when) ? Math.max(0, when / 1000 - Date.now() / 1000) : null;
}

/** (scheme, host, port) of an http(s) URL as one string; null for anything else or a URL
 * with user info (never the collector's origin). */
export function origin(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.username || parsed.password) return null;
  const port = parsed.port || (parsed.protocol === "https:" ? "443" : "80");
  return `${parsed.protocol}//${parsed.hostname.toLowerCase()}:${port}`;
}

/** An answer as read once (its body may be read only once). */
export interface Answer {
  status: number;
  headers: Headers;
  json: unknown;
}

function collectorError(json: unknown): [string, string] | null {
  const error = (json as { error?: { field?: unknown; reason?: unknown } } | null)?.error;
  if (typeof error?.field !== "string" || typeof error.reason !== "string") return null;
  return [error.field.slice(0, 100), error.reason.slice(0, 300)];
}

export function reasonOf(answer: Answer): string {
  const error = collectorError(answer.json);
  return error ? `${error[0]}: ${error[1]}` : `HTTP ${answer.status}`;
}

/** The error for an answer retrying alone will not get past: a refused token, or a 4xx that
 * is not the collector's refusal of this request (a wrong URL, a proxy). */
export function problemOf(answer: Answer): Problem | null {
  const { status } = answer;
  if (TOKEN_STATUSES.has(status)) {
    return {
      kind: "token_refused",
      field: "token",
      reason: `the collector refused the ingest token (HTTP ${status}, ${reasonOf(answer)}): check the token the Reporter is given and that the collector knows it`,
      httpStatus: status,
    };
  }
  if (status < 300 || status >= 500 || RETRYABLE_4XX.has(status) || status === 413) return null;
  const error = collectorError(answer.json);
  if (error && !URL_FIELDS.has(error[0])) return null;
  return {
    kind: "collector_url",
    field: "collector_url",
    reason: `HTTP ${status} (${reasonOf(answer)}) is not the collector's answer: check collectorUrl and any proxy before the collector`,
    httpStatus: status,
  };
}

function notFollowed(reason: string, status: number | null): Problem {
  return { kind: "redirect_not_followed", field: "collector_url", reason, httpStatus: status };
}

/** Network errors and timeouts, for stats().lastError. */
export function networkReason(error: unknown, timeoutSeconds: number): string {
  const name = (error as Error)?.name;
  if (name === "TimeoutError" || name === "AbortError") {
    return `network: no complete answer within the ${timeoutSeconds} s timeout`;
  }
  return `network: ${name ?? "error"}`;
}

/**
 * `method url` through the redirects within the collector's origin, all under one deadline
 * (the body read included); the answer, or the problem of a redirect not followed. Throws
 * on a network error or the deadline (the caller classifies it).
 */
export async function exchange(
  fetcher: typeof fetch,
  home: string,
  url: string,
  init: RequestInit,
  timeoutSeconds: number,
  onDate: (date: string | null) => void,
): Promise<Answer | Problem> {
  const signal = AbortSignal.timeout(timeoutSeconds * 1000);
  const collector = origin(home);
  let target = url;
  let status: number | null = null;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const response = await fetcher(target, { ...init, signal, credentials: "omit", redirect: "manual" });
    onDate(response.headers.get("Date"));
    status = response.status;
    if (response.type === "opaqueredirect") {
      // A browser hides a manual redirect's target: it is not followed.
      return notFollowed("the collectorUrl answered a redirect (its target hidden by the browser): not followed; set collectorUrl to the collector's own URL", null);
    }
    if (!REDIRECTS.has(status)) {
      const text = await response.text();
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      return { status, headers: response.headers, json };
    }
    const location = response.headers.get("Location");
    const said = `the collectorUrl answered HTTP ${status}`;
    if (!location) return notFollowed(`${said} without a Location`, status);
    const next = new URL(location, target).toString();
    if (collector === null || origin(next) !== collector) {
      const where = origin(next) ?? "a URL that is not http(s)";
      return notFollowed(`${said} to another origin (${where}): not followed, so the token is not sent there; set collectorUrl to the collector's own URL`, status);
    }
    if ((init.method ?? "GET") !== "GET" && !KEEPS_METHOD.has(status)) {
      return notFollowed(`${said}, which would turn the POST into a GET: not followed (a proxy before the collector must pass POSTs through, or answer 307 or 308)`, status);
    }
    target = next;
  }
  return notFollowed(`more than ${MAX_REDIRECTS} redirects (a loop?): not followed`, status);
}

/** The verdict on a POST /v1/reports answer for `sent` reports. */
export function classify(answer: Answer, sent: number): Outcome {
  const { status } = answer;
  const retryAfter = parseRetryAfter(answer.headers.get("Retry-After"));
  const outcome = (verdict: Verdict, reason: string, problem: Problem | null = null): Outcome => ({ verdict, status, reason, retryAfter, problem });
  if (status >= 200 && status < 300) {
    // Only the collector's own answer counts (not a captive portal's page).
    const accepted = (answer.json as { accepted?: unknown } | null)?.accepted;
    return accepted === sent ? outcome("delivered", "") : outcome("retry", "2xx without the collector's answer");
  }
  if (status >= 500 || RETRYABLE_4XX.has(status)) return outcome("retry", reasonOf(answer));
  if (status === 413) return outcome("too_large", reasonOf(answer));
  const problem = problemOf(answer);
  if (problem) return outcome(problem.kind === "token_refused" ? "token" : "retry", problem.reason, problem);
  return outcome("reject", reasonOf(answer));
}
