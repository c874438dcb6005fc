/**
 * metav1.Time as the API server writes it, for every floor that sets a timestamp (conditions,
 * events, the fake client).
 *
 * Guarantees: `kubeTimestamp` is RFC 3339 in UTC with second precision — the form the API server
 * stores and returns, so a timestamp written compares equal to the one read back.
 */

/** RFC 3339 with second precision, as the API server stores metav1.Time. */
export function kubeTimestamp(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
