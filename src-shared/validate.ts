// A small runtime schema helper for the API contract: each schema checks an untrusted value
// (from IPC or HTTP) and names the offending field when it is wrong. Hand-written instead of
// a library because the contract needs only a handful of shapes, and the same file must be
// importable by the sandboxed preload, the renderer and Node without any dependency.
//
// The TypeScript type of a schema's output is inferred (`Infer<typeof schema>`), so the
// contract states each input once and gets both the check and the type from it.

/** A call input that does not match the contract. `field` is a dotted path such as `patch.reward`. */
export class ValidationError extends Error {
  override name = 'ValidationError';
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(`invalid input: ${field || 'input'} ${problem}`);
  }
}

export interface Schema<T> {
  /** Checks `value` and returns it typed, or throws a ValidationError naming `field`. */
  parse(value: unknown, field: string): T;
  /** True when `undefined` is an accepted value, so the key may be left out of an object. */
  readonly optional?: boolean;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

type Shape = Record<string, Schema<unknown>>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: undefined extends Infer<S[K]> ? K : never }[keyof S];
type RequiredKeys<S extends Shape> = Exclude<keyof S, OptionalKeys<S>>;
export type ObjectOf<S extends Shape> = { [K in RequiredKeys<S>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Infer<S[K]> };

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return value.length > 40 ? 'a string' : JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value === 'object' ? 'an object' : typeof value;
}

function fail(field: string, problem: string): never {
  throw new ValidationError(field, problem);
}

export function string(opts: { min?: number; max?: number } = {}): Schema<string> {
  const min = opts.min ?? 0;
  const max = opts.max ?? 1_000_000;
  return {
    parse(value, field) {
      if (typeof value !== 'string') fail(field, `must be a string, got ${describe(value)}`);
      if (value.length < min) fail(field, min === 1 ? 'must not be empty' : `must have at least ${min} characters`);
      if (value.length > max) fail(field, `must have at most ${max} characters (got ${value.length})`);
      return value;
    },
  };
}

export function number(opts: { min?: number; max?: number; integer?: boolean } = {}): Schema<number> {
  return {
    parse(value, field) {
      if (typeof value !== 'number' || !Number.isFinite(value)) fail(field, `must be a finite number, got ${describe(value)}`);
      if (opts.integer && !Number.isInteger(value)) fail(field, `must be an integer, got ${value}`);
      if (opts.min !== undefined && value < opts.min) fail(field, `must be ≥ ${opts.min}, got ${value}`);
      if (opts.max !== undefined && value > opts.max) fail(field, `must be ≤ ${opts.max}, got ${value}`);
      return value;
    },
  };
}

export function integer(opts: { min?: number; max?: number } = {}): Schema<number> {
  return number({ ...opts, integer: true });
}

export function boolean(): Schema<boolean> {
  return {
    parse(value, field) {
      if (typeof value !== 'boolean') fail(field, `must be true or false, got ${describe(value)}`);
      return value;
    },
  };
}

/** One of a fixed set of strings or numbers. */
export function oneOf<const T extends string | number>(values: readonly T[]): Schema<T> {
  return {
    parse(value, field) {
      if (!values.includes(value as T)) fail(field, `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}, got ${describe(value)}`);
      return value as T;
    },
  };
}

export function optional<T>(schema: Schema<T>): Schema<T | undefined> {
  return {
    optional: true,
    parse(value, field) {
      return value === undefined ? undefined : schema.parse(value, field);
    },
  };
}

export function nullable<T>(schema: Schema<T>): Schema<T | null> {
  return {
    parse(value, field) {
      return value === null ? null : schema.parse(value, field);
    },
  };
}

export function array<T>(item: Schema<T>, opts: { min?: number; max?: number } = {}): Schema<T[]> {
  return {
    parse(value, field) {
      if (!Array.isArray(value)) fail(field, `must be an array, got ${describe(value)}`);
      if (opts.min !== undefined && value.length < opts.min) fail(field, `must have at least ${opts.min} item(s)`);
      if (opts.max !== undefined && value.length > opts.max) fail(field, `must have at most ${opts.max} items`);
      return value.map((v, i) => item.parse(v, `${field}[${i}]`));
    },
  };
}

/** A plain object with exactly these keys: unknown keys are refused, so typos are caught. */
export function object<S extends Shape>(shape: S): Schema<ObjectOf<S>> {
  return {
    parse(value, field) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, `must be an object, got ${describe(value)}`);
      const input = value as Record<string, unknown>;
      const prefix = field ? `${field}.` : '';
      for (const key of Object.keys(input)) {
        if (!Object.prototype.hasOwnProperty.call(shape, key)) fail(prefix + key, `is not a known field (expected ${Object.keys(shape).join(', ') || 'no fields'})`);
      }
      const out: Record<string, unknown> = {};
      for (const [key, schema] of Object.entries(shape)) {
        if (!(key in input) || input[key] === undefined) {
          if (!schema.optional) fail(prefix + key, 'is required');
          continue;
        }
        out[key] = schema.parse(input[key], prefix + key);
      }
      return out as ObjectOf<S>;
    },
  };
}

/**
 * One of several object shapes, told apart by the string at `key` (each shape states `key`
 * itself, as `oneOf([name])`): the shape the tag names checks the rest, strictly, as object() does.
 */
export function variants<V extends Record<string, Schema<object>>>(key: string, shapes: V): Schema<Infer<V[keyof V]>> {
  const names = Object.keys(shapes);
  return {
    parse(value, field) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, `must be an object, got ${describe(value)}`);
      const tag = (value as Record<string, unknown>)[key];
      const at = field ? `${field}.${key}` : key;
      if (tag === undefined) fail(at, 'is required');
      if (typeof tag !== 'string' || !Object.prototype.hasOwnProperty.call(shapes, tag)) fail(at, `must be one of ${names.map((n) => JSON.stringify(n)).join(', ')}, got ${describe(tag)}`);
      return shapes[tag]!.parse(value, field) as Infer<V[keyof V]>;
    },
  };
}
