/**
 * Who may read /metrics when it is served securely: the API server decides, as with
 * controller-runtime's secure metrics (`filters.WithAuthenticationAndAuthorization`).
 *
 * Guarantees:
 * - The caller's bearer token is checked with a TokenReview; the user it names (with groups,
 *   uid and extra) is checked with a SubjectAccessReview for the non-resource URL and verb
 *   (`get /metrics`), so RBAC `nonResourceURLs: ["/metrics"], verbs: ["get"]` grants it.
 * - No token or a token the API server does not accept: 401. An authenticated user without the
 *   right: 403. The review calls themselves failing: 500 with the cause, never an allow.
 * - Decisions are remembered for 10 s per token and path (a scrape every few seconds costs the
 *   API server two reviews per 10 s per scraper, not two per scrape).
 */
import type { KubeClient } from '../client/client.ts';

export interface AuthorizationDecision {
  code: 200 | 401 | 403 | 500;
  reason: string;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  error?: string;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

const decisionTtlMs = 10_000;
const maxRemembered = 1024;

export class MetricsAuthorizer {
  private readonly remembered = new Map<string, { decision: AuthorizationDecision; until: number }>();

  constructor(private readonly client: KubeClient) {}

  /** Whether the request's `Authorization` header allows `verb` on the non-resource `path`. */
  async authorize(authorization: string | undefined, path: string, verb = 'get'): Promise<AuthorizationDecision> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) return { code: 401, reason: 'a bearer token is required' };
    const key = `${verb} ${path} ${token}`;
    const known = this.remembered.get(key);
    if (known && known.until > Date.now()) return known.decision;
    let decision: AuthorizationDecision;
    try {
      decision = await this.review(token, path, verb);
    } catch (err) {
      return { code: 500, reason: `authorization could not be checked: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (this.remembered.size >= maxRemembered) this.remembered.clear();
    this.remembered.set(key, { decision, until: Date.now() + decisionTtlMs });
    return decision;
  }

  private async review(token: string, path: string, verb: string): Promise<AuthorizationDecision> {
    const tokenReview = await this.client.raw<{ status?: TokenReviewStatus }>({
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/tokenreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
    });
    const status = tokenReview.status ?? {};
    if (!status.authenticated || !status.user?.username) return { code: 401, reason: status.error || 'the token is not valid' };
    const { username, uid, groups, extra } = status.user;
    const access = await this.client.raw<{ status?: { allowed?: boolean; reason?: string } }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user: username, uid, groups, extra, nonResourceAttributes: { path, verb } },
      },
    });
    if (access.status?.allowed) return { code: 200, reason: 'allowed' };
    return { code: 403, reason: `${username} may not ${verb} ${path}${access.status?.reason ? `: ${access.status.reason}` : ''}` };
  }
}
