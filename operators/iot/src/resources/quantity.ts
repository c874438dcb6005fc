/**
 * resource.Quantity in the canonical form the API server stores and returns.
 *
 * Guarantees: `canonicalQuantity(q)` equals the string the API server returns for `q` inside a
 * built-in object (Pod resources, PVC requests, emptyDir sizeLimit), for every quantity of the
 * IoTService schema's grammar: values are rounded up to nano precision, binary suffixes stay
 * binary when the value is a whole number of at least 1Ki (`1024Mi` -> `1Gi`, `1.5Gi` -> `1536Mi`),
 * otherwise the largest SI suffix that keeps an integer mantissa is used (`0.5` -> `500m`,
 * `1000` -> `1k`, `0.5Ki` -> `512`), and exponent notation stays exponent notation (`1.5e3` -> `1500`,
 * `10e3` -> `10e3`). Desired objects carry this form so that comparing them with what the server
 * returns finds no difference once applied. A string outside the grammar is returned unchanged
 * (the API server will refuse it and say why). `quantityNanos` gives a quantity's exact value
 * (in nano units, rounded up like the API server) so that two quantities can be compared.
 */

const NANO_PER_UNIT = 1_000_000_000n;

const DECIMAL_SUFFIX_EXPONENT: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIX_POWER: Readonly<Record<string, number>> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };
const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;
const DECIMAL_SUFFIX_BY_EXPONENT = new Map(Object.entries(DECIMAL_SUFFIX_EXPONENT).map(([s, e]) => [e, s]));

type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

const QUANTITY = /^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)$/;

export function canonicalQuantity(quantity: string | number): string {
  const text = String(quantity).trim();
  const match = QUANTITY.exec(text);
  if (!match) return String(quantity);
  const [, sign = '', number = '', suffix = ''] = match;
  const [whole = '', fraction = ''] = number.split('.');

  let format: QuantityFormat;
  let exponent10 = 0;
  let binaryPower = 0;
  if (suffix in DECIMAL_SUFFIX_EXPONENT) {
    format = 'DecimalSI';
    exponent10 = DECIMAL_SUFFIX_EXPONENT[suffix] ?? 0;
  } else if (suffix in BINARY_SUFFIX_POWER) {
    format = 'BinarySI';
    binaryPower = BINARY_SUFFIX_POWER[suffix] ?? 0;
  } else if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
    format = 'DecimalExponent';
    exponent10 = Number.parseInt(suffix.slice(1), 10);
    if (Math.abs(exponent10) > 1000) return String(quantity);
  } else {
    return String(quantity);
  }

  const nanos = nanoUnits(whole, fraction, exponent10, binaryPower);
  if (nanos === 0n) return '0';
  const negative = sign === '-';

  if (format === 'BinarySI' && nanos >= 1024n * NANO_PER_UNIT && nanos % NANO_PER_UNIT === 0n) {
    let units = nanos / NANO_PER_UNIT;
    let power = 0;
    while (units % 1024n === 0n && power < BINARY_SUFFIXES.length - 1) {
      units /= 1024n;
      power += 1;
    }
    return `${negative ? '-' : ''}${units}${BINARY_SUFFIXES[power]}`;
  }
  if (format === 'BinarySI') format = 'DecimalSI';

  let mantissa = nanos;
  let exponent = -9;
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent += 1;
  }
  while (exponent % 3 !== 0) {
    mantissa *= 10n;
    exponent -= 1;
  }
  const prefix = `${negative ? '-' : ''}${mantissa}`;
  if (format === 'DecimalExponent') return exponent === 0 ? prefix : `${prefix}e${exponent}`;
  const decimalSuffix = DECIMAL_SUFFIX_BY_EXPONENT.get(exponent);
  // Beyond 10^18 the API server has no SI suffix; leave such values as written.
  return decimalSuffix === undefined ? String(quantity) : `${prefix}${decimalSuffix}`;
}

/** value = digits * 10^scale * 1024^binaryPower, counted in nano units, rounded up. */
function nanoUnits(whole: string, fraction: string, exponent10: number, binaryPower: number): bigint {
  const digits = BigInt(`${whole}${fraction}` || '0');
  const scale = exponent10 - fraction.length + 9;
  let numerator = digits * 1024n ** BigInt(binaryPower);
  let denominator = 1n;
  if (scale >= 0) numerator *= 10n ** BigInt(scale);
  else denominator = 10n ** BigInt(-scale);
  return (numerator + denominator - 1n) / denominator;
}

/** The value of a non-negative quantity in nano units (for comparing quantities), or undefined outside the grammar. */
export function quantityNanos(quantity: string | number): bigint | undefined {
  const match = QUANTITY.exec(String(quantity).trim());
  if (!match || match[1] === '-') return undefined;
  const [, , number = '', suffix = ''] = match;
  const [whole = '', fraction = ''] = number.split('.');
  if (suffix in DECIMAL_SUFFIX_EXPONENT) return nanoUnits(whole, fraction, DECIMAL_SUFFIX_EXPONENT[suffix] ?? 0, 0);
  if (suffix in BINARY_SUFFIX_POWER) return nanoUnits(whole, fraction, 0, BINARY_SUFFIX_POWER[suffix] ?? 0);
  if (/^[eE][+-]?[0-9]+$/.test(suffix)) {
    const exponent10 = Number.parseInt(suffix.slice(1), 10);
    return Math.abs(exponent10) > 1000 ? undefined : nanoUnits(whole, fraction, exponent10, 0);
  }
  return undefined;
}

/** A map of quantities (ResourceList) in canonical form, keys sorted. */
export function canonicalResourceList(list: Readonly<Record<string, string | number>>): Record<string, string> {
  return Object.fromEntries(
    Object.keys(list)
      .sort()
      .map((name) => [name, canonicalQuantity(list[name] ?? '')]),
  );
}
