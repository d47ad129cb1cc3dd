import assert from 'node:assert/strict';
import { test } from 'node:test';
import canonicalize from 'canonicalize';
import { canonicalJson, type JsonValue, rfc8785Json } from '../src/index.js';

/*
 * Core's one JCS serializer against an independent RFC 8785 implementation (the `canonicalize`
 * package, a devDependency only) over generated values, plus the RFC's own examples.
 */

/** A small seeded PRNG (mulberry32): the same values on every run, so a failure reproduces. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The double whose IEEE 754 bits are `hex` (RFC 8785 appendix B lists numbers this way). */
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

const EDGE_NUMBERS = [0, -0, 1, -1, 1e21, 1e-7, 1e-6, 999999999999999900000, 5e-324, -5e-324, Number.MAX_VALUE, Number.MIN_VALUE];
EDGE_NUMBERS.push(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 2 ** 53, 0.1 + 0.2, 1e9 / 3, 1e23, 4.5, 2e-3);

function generator(seed: number) {
  const rand = prng(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;

  function number(): number {
    switch (int(5)) {
      case 0:
        return pick(EDGE_NUMBERS);
      case 1:
        return int(2 ** 31) - 2 ** 30;
      case 2:
        return (rand() - 0.5) * 10 ** (int(40) - 20);
      default: {
        // Any finite double, from random bits: subnormals, huge exponents, long mantissas.
        const hi = int(2 ** 32);
        const lo = int(2 ** 32);
        const n = fromBits((BigInt(hi) * 2n ** 32n + BigInt(lo)).toString(16).padStart(16, '0'));
        return Number.isFinite(n) ? n : -0;
      }
    }
  }

  function char(): string {
    switch (int(6)) {
      case 0:
        return String.fromCharCode(int(0x20)); // controls: \b \t \n \f \r and \u00XX escapes
      case 1:
        return pick(['"', '\\', '/', "'", '\u007f', '\u0080', '\u2028', '\u2029']);
      case 2:
        return String.fromCodePoint(0x10000 + int(0x100000)); // astral: a surrogate pair
      case 3:
        return String.fromCharCode(0xe000 + int(0x2000)); // after the surrogates in UTF-16 order, before astral in code points
      case 4:
        return String.fromCharCode(0x80 + int(0xd800 - 0x80));
      default:
        return String.fromCharCode(0x20 + int(0x5f));
    }
  }

  const string = (): string => Array.from({ length: int(6) }, char).join('');

  function value(depth: number): JsonValue {
    const kind = depth >= 4 ? int(4) : int(6);
    switch (kind) {
      case 0:
        return number();
      case 1:
        return string();
      case 2:
        return pick([true, false, null]);
      case 3:
        return number();
      case 4:
        return Array.from({ length: int(5) }, () => value(depth + 1));
      default: {
        const obj: Record<string, JsonValue> = {};
        for (let i = int(6); i > 0; i--) obj[string()] = value(depth + 1);
        return obj;
      }
    }
  }
  return value;
}

function onlySafeIntegers(v: JsonValue): boolean {
  if (typeof v === 'number') return Number.isSafeInteger(v);
  if (Array.isArray(v)) return v.every((x) => onlySafeIntegers(x as JsonValue));
  if (v !== null && typeof v === 'object') return Object.values(v).every(onlySafeIntegers);
  return true;
}

test('rfc8785Json writes what an independent RFC 8785 implementation writes, over 5,000 generated values', () => {
  const value = generator(8785);
  let integerOnly = 0;
  for (let i = 0; i < 5000; i++) {
    const v = value(0);
    const expected = canonicalize(v);
    assert.equal(rfc8785Json(v), expected, `value #${i}: ${JSON.stringify(v)}`);
    if (onlySafeIntegers(v)) {
      integerOnly++;
      assert.equal(canonicalJson(v), expected, `the audit form differs from RFC 8785 on value #${i}`);
    } else {
      assert.throws(() => canonicalJson(v), TypeError);
    }
  }
  assert.ok(integerOnly > 500 && integerOnly < 4500, `both domains are exercised (${integerOnly} integer-only values)`);
});

test('numbers: -0 is 0, exponents from 1e21 and below 1e-6, the shortest form that round-trips', () => {
  const cases: readonly [number, string][] = [
    [-0, '0'],
    [1e21, '1e+21'],
    [999999999999999900000, '999999999999999900000'],
    [5e-324, '5e-324'],
    [1e-7, '1e-7'],
    [0.000001, '0.000001'],
    [1e9 / 3, '333333333.3333333'],
    [Number.MAX_VALUE, '1.7976931348623157e+308'],
  ];
  for (const [n, text] of cases) {
    assert.equal(rfc8785Json(n), text);
    assert.equal(canonicalize(n), text, `the oracle agrees on ${text}`);
  }
});

test('RFC 8785 appendix B: IEEE 754 bit patterns and their canonical text', () => {
  const vectors: readonly [string, string][] = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['41b3de4355555555', '333333333.3333333'],
  ];
  for (const [bits, text] of vectors) assert.equal(rfc8785Json(fromBits(bits)), text, bits);
  for (const bits of ['7fffffffffffffff', '7ff0000000000000', 'fff0000000000000']) {
    assert.throws(() => rfc8785Json(fromBits(bits)), TypeError, `${bits} has no JSON form`);
  }
});

test('RFC 8785 section 3.2.3: keys sort by UTF-16 code units, strings escape only what JSON must', () => {
  const sorting = {
    '\u20ac': 'Euro Sign',
    '\r': 'Carriage Return',
    '\ufb33': 'Hebrew Letter Dalet With Dagesh',
    '1': 'One',
    '\ud83d\ude00': 'Emoji: Grinning Face',
    '\u0080': 'Control',
    '\u00f6': 'Latin Small Letter O With Diaeresis',
  };
  // U+1F600 (a surrogate pair, 0xD83D...) sorts before U+FB33 by code units, after it by code points.
  const sorted =
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}';
  assert.equal(rfc8785Json(sorting), sorted);
  const mixed = JSON.parse(
    '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
  ) as JsonValue;
  assert.equal(
    rfc8785Json(mixed),
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
  );
});

test('a lone surrogate is refused by RFC 8785 (as the oracle refuses it) and escaped in the audit form', () => {
  for (const v of [{ a: '\ud800' }, { '\udc00x': 1 }, ['ok', 'x\ud83d']] as JsonValue[]) {
    assert.throws(() => canonicalize(v));
    assert.throws(() => rfc8785Json(v), TypeError);
  }
  assert.equal(canonicalJson({ name: 'a\ud800' }), '{"name":"a\\ud800"}');
  assert.equal(rfc8785Json({ pair: '\ud83d\ude00' }), '{"pair":"\ud83d\ude00"}');
});

test('NaN and the infinities have no RFC 8785 form', () => {
  for (const n of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
    assert.throws(() => canonicalize({ n }));
    assert.throws(() => rfc8785Json({ n }), TypeError);
  }
});
