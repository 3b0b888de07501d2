/**
 * Sliding layers (Gemma 2 and 3, OLMo 3; ModelConfig.sliding): layers whose queries see only the last
 * `sliding_window` positions (./attention-masks.ts), at a RoPE base of their own and never
 * scaled, between layers that see the whole context with the model's own RoPE. As config.json
 * gives them in both of the forms transformers has written:
 * - 4.5x: `rope_theta`, `rope_scaling` (the global layers'), a base for the sliding ones under a
 *   family's own key (Gemma 3's `rope_local_base_freq`; OLMo 3 has none: the global base), and
 *   which layers slide as `sliding_window_pattern` (every n-th layer global) or `layer_types`;
 * - 5.x: `rope_parameters` per layer type (`full_attention`, `sliding_attention`), or one object
 *   for every layer (Gemma 2), and `layer_types`.
 * And as a GGUF file gives them, as llama.cpp reads them: `attention.sliding_window`,
 * `attention.sliding_window_pattern` (a count, or one flag a layer), `rope.freq_base_swa`.
 */
import { UserError } from '../../src-shared/types.js';
import type { RopeScaling, SlidingLayers } from './model-config.js';

type Raw = Record<string, unknown>;

export interface SlidingRead {
  sliding: SlidingLayers;
  /** The global layers' RoPE. */
  ropeTheta: number;
  ropeScaling?: RopeScaling;
}

export interface SlidingDefaults {
  /** Every n-th layer global where config.json says nothing (Gemma 2: 2; Gemma 3: 6; OLMo 3: 4). */
  pattern: number;
  /** The global layers' base where config.json says nothing. */
  theta: number;
  /** The 4.5x key of the sliding layers' base and its default (Gemma 3's); absent: the global base. */
  localThetaKey?: { key: string; fallback: number };
}

export function readSlidingLayers(raw: Raw, file: string, numLayers: number, defaults: SlidingDefaults, parseScaling: (scaling: unknown) => RopeScaling | undefined): SlidingRead {
  const window = raw.sliding_window;
  if (typeof window !== 'number' || !Number.isInteger(window) || window < 1) throw new UserError(`${file}: sliding_window must be a positive integer, found ${JSON.stringify(window)}`);
  const rope = readRopes(raw, file, defaults, parseScaling);
  return { sliding: { window, layers: whichSlide(raw, file, numLayers, defaults.pattern), ropeTheta: rope.localTheta }, ropeTheta: rope.theta, ...(rope.scaling ? { ropeScaling: rope.scaling } : {}) };
}

/** Which layers slide: `layer_types`, else every layer but each `sliding_window_pattern`-th, as transformers counts them. */
function whichSlide(raw: Raw, file: string, numLayers: number, fallback: number): boolean[] {
  const types = raw.layer_types;
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length !== numLayers || !types.every((t) => t === 'sliding_attention' || t === 'full_attention')) {
      throw new UserError(`${file}: layer_types must be ${numLayers} entries of "sliding_attention" or "full_attention", found ${JSON.stringify(types)?.slice(0, 120)}`);
    }
    return types.map((t) => t === 'sliding_attention');
  }
  const pattern = raw.sliding_window_pattern ?? raw._sliding_window_pattern ?? fallback;
  if (typeof pattern !== 'number' || !Number.isInteger(pattern) || pattern < 1) throw new UserError(`${file}: sliding_window_pattern must be a positive integer, found ${JSON.stringify(pattern)}`);
  return Array.from({ length: numLayers }, (_, i) => (i + 1) % pattern !== 0);
}

function readRopes(raw: Raw, file: string, defaults: SlidingDefaults, parseScaling: (scaling: unknown) => RopeScaling | undefined): { theta: number; scaling?: RopeScaling; localTheta: number } {
  const params = raw.rope_parameters;
  if (params === undefined || params === null) {
    const theta = raw.rope_theta ?? defaults.theta;
    const localTheta = defaults.localThetaKey ? raw[defaults.localThetaKey.key] ?? defaults.localThetaKey.fallback : theta;
    if (typeof theta !== 'number' || typeof localTheta !== 'number') throw new UserError(`${file}: rope_theta${defaults.localThetaKey ? ` and ${defaults.localThetaKey.key}` : ''} must be numbers`);
    return { theta, localTheta, scaling: parseScaling(raw.rope_scaling) };
  }
  const p = params as Record<string, Raw | undefined>;
  // Only an object naming its type is a scaling; {rope_theta} alone is none.
  const typed = (r: Raw) => (r.rope_type === undefined && r.type === undefined ? undefined : parseScaling(r));
  // One object for every layer (Gemma 2's): the sliding layers take the global base unless the family names theirs.
  if (typeof (params as Raw).rope_theta === 'number' && !p.full_attention && !p.sliding_attention) {
    const { rope_theta: theta, ...scaling } = params as Raw;
    const localTheta = defaults.localThetaKey ? raw[defaults.localThetaKey.key] ?? defaults.localThetaKey.fallback : theta;
    if (typeof localTheta !== 'number') throw new UserError(`${file}: ${defaults.localThetaKey!.key} must be a number`);
    return { theta: theta as number, localTheta, scaling: typed(scaling) };
  }
  const full = p.full_attention, sliding = p.sliding_attention;
  if (typeof full?.rope_theta !== 'number' || typeof sliding?.rope_theta !== 'number') {
    throw new UserError(`${file}: rope_parameters must give rope_theta for full_attention and sliding_attention, found ${JSON.stringify(params).slice(0, 160)}`);
  }
  const { rope_theta: localTheta, ...localScaling } = sliding;
  if (typed(localScaling) !== undefined) throw new UserError(`${file}: rope_parameters.sliding_attention ${JSON.stringify(sliding)} is not supported (the sliding layers' RoPE is unscaled)`);
  const { rope_theta: theta, ...scaling } = full;
  return { theta: theta as number, localTheta: localTheta as number, scaling: typed(scaling) };
}

/**
 * The sliding layers a GGUF file describes, as llama.cpp reads them: none where
 * `attention.sliding_window` is 0 or absent; `attention.sliding_window_pattern` a count or one
 * flag a layer (absent: the family's count); `rope.freq_base_swa` (absent: `fallbackTheta`).
 * `get` reads `<arch>.<key>`.
 */
export function slidingFromGguf(get: (key: string) => unknown, file: string, numLayers: number, defaultPattern: number, fallbackTheta: number): SlidingLayers | undefined {
  const window = get('attention.sliding_window');
  if (typeof window !== 'number' || window <= 0) return undefined;
  const pattern = get('attention.sliding_window_pattern') ?? defaultPattern;
  let layers: boolean[];
  if (Array.isArray(pattern) && pattern.length === numLayers && pattern.every((p) => typeof p === 'boolean')) layers = pattern as boolean[];
  else if (typeof pattern === 'number' && Number.isInteger(pattern) && pattern >= 0) layers = Array.from({ length: numLayers }, (_, i) => pattern === 0 || i % pattern < pattern - 1);
  else throw new UserError(`${file}: attention.sliding_window_pattern must be a count or ${numLayers} flags, found ${JSON.stringify(pattern)?.slice(0, 80)}`);
  const theta = get('rope.freq_base_swa') ?? fallbackTheta;
  if (typeof theta !== 'number' || !(theta > 0)) throw new UserError(`${file}: rope.freq_base_swa must be a positive number, found ${JSON.stringify(theta)}`);
  return { window, layers, ropeTheta: theta };
}

/** config.json's fields for sliding layers (a merged folder of a GGUF base), as readSlidingLayers reads them back. */
export function slidingConfigJson(s: SlidingLayers): Record<string, unknown> {
  return { sliding_window: s.window, layer_types: s.layers.map((slides) => (slides ? 'sliding_attention' : 'full_attention')) };
}
