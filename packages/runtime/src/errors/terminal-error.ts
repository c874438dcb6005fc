/**
 * The error that says "retrying will not fix this", shared by the floors that throw it (status
 * helpers, reconcilers) and the one that acts on it (the controller).
 *
 * Guarantees: a `TerminalError` (or a subclass, e.g. status/shape.ts's `UnexpectedShapeError`)
 * thrown from a reconcile is recorded and counted by the controller and not retried until the
 * object changes again (guarantee 4); `name` is `TerminalError` for logs.
 */

/** An error that retrying will not fix: the controller records it and does not retry. */
export class TerminalError extends Error {
  override readonly name = 'TerminalError';
}
