/**
 * What the fault proxy knows about a request, and which injected faults apply to it.
 *
 * Guarantees:
 * - `describeApiRequest(method, url)` names the Kubernetes verb (get, list, watch, create,
 *   update, patch, delete, deletecollection), API group ("" for the core group), version,
 *   resource, subresource, namespace and name of a request path under `/api` or `/apis`, as the
 *   API server's request-info resolver does; other paths (discovery, /healthz) get verb
 *   `nonresource` with the method kept in `method`.
 * - `matchesRequest(match, request)` is true when every field set in `match` holds for the
 *   request: each of client, verb, group, resource, subresource, namespace, name is one value or
 *   a list of values; `path` is a prefix of the path (string) or a pattern it matches; `query`
 *   names parameters that must be present (`true`) or have one exact value. An empty match
 *   matches every request.
 */

export type ApiVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'nonresource';

export interface ApiRequestInfo {
  /** Which proxy client (listener) the request came through. */
  client: string;
  method: string;
  path: string;
  query: URLSearchParams;
  verb: ApiVerb;
  group: string;
  version: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

type OneOrMore<T> = T | readonly T[];

export interface RequestMatch {
  client?: OneOrMore<string>;
  verb?: OneOrMore<ApiVerb>;
  /** "" is the core group. */
  group?: OneOrMore<string>;
  resource?: OneOrMore<string>;
  subresource?: OneOrMore<string>;
  namespace?: OneOrMore<string>;
  name?: OneOrMore<string>;
  /** A string is a prefix of the request path; a RegExp is tested against it. */
  path?: string | RegExp;
  /** Query parameters: `true` = present with any value, a string = exactly that value. */
  query?: Record<string, true | string>;
}

const writeVerbs: Record<string, ApiVerb> = { POST: 'create', PUT: 'update', PATCH: 'patch' };

/** The request info of `method` on `url` (path and query) arriving through `client`. */
export function describeApiRequest(method: string, url: string, client = 'default'): ApiRequestInfo {
  const parsed = new URL(url, 'https://proxy.invalid');
  const parts = parsed.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const info: ApiRequestInfo = {
    client,
    method,
    path: parsed.pathname,
    query: parsed.searchParams,
    verb: 'nonresource',
    group: '',
    version: '',
    resource: '',
    subresource: '',
    namespace: '',
    name: '',
  };
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 3) {
    info.version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 4) {
    info.group = parts[1]!;
    info.version = parts[2]!;
    rest = parts.slice(3);
  } else {
    return info;
  }
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    info.namespace = rest[1]!;
    rest = rest.slice(2);
  }
  // /api/v1/namespaces/<name> is the namespace object itself.
  [info.resource = '', info.name = '', info.subresource = ''] = rest;
  const watch = parsed.searchParams.get('watch');
  const isWatch = watch === 'true' || watch === '1';
  if (method === 'GET') info.verb = isWatch ? 'watch' : info.name ? 'get' : 'list';
  else if (method === 'DELETE') info.verb = info.name ? 'delete' : 'deletecollection';
  else info.verb = writeVerbs[method] ?? 'nonresource';
  return info;
}

function oneOf<T>(expected: OneOrMore<T> | undefined, actual: T): boolean {
  if (expected === undefined) return true;
  return Array.isArray(expected) ? expected.includes(actual) : expected === actual;
}

/** True when every field of `match` holds for `request`. */
export function matchesRequest(match: RequestMatch, request: ApiRequestInfo): boolean {
  if (!oneOf(match.client, request.client)) return false;
  if (!oneOf(match.verb, request.verb)) return false;
  if (!oneOf(match.group, request.group)) return false;
  if (!oneOf(match.resource, request.resource)) return false;
  if (!oneOf(match.subresource, request.subresource)) return false;
  if (!oneOf(match.namespace, request.namespace)) return false;
  if (!oneOf(match.name, request.name)) return false;
  if (typeof match.path === 'string' && !request.path.startsWith(match.path)) return false;
  if (match.path instanceof RegExp && !match.path.test(request.path)) return false;
  for (const [key, value] of Object.entries(match.query ?? {})) {
    const actual = request.query.get(key);
    if (actual === null || (value !== true && actual !== value)) return false;
  }
  return true;
}
