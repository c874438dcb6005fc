/**
 * JSON-lines logging.
 *
 * Guarantees: every call writes exactly one line, a JSON object with `time` (ISO 8601), `level`,
 * `component` and `msg` first, then the given fields; an Error field becomes its message. A line
 * never spans two writes, so lines of concurrent calls do not interleave.
 */

export type Level = 'info' | 'warn' | 'error';
export type Fields = Readonly<Record<string, unknown>>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
}

export function createLogger(component: string, write: (line: string) => void = (line) => process.stdout.write(line)): Logger {
  const emit = (level: Level, msg: string, fields: Fields = {}) => {
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level, component, msg };
    for (const [key, value] of Object.entries(fields)) entry[key] = value instanceof Error ? value.message : value;
    write(`${JSON.stringify(entry)}\n`);
  };
  return {
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
  };
}
