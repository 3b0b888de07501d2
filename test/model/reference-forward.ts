/**
 * A plain-JS, float64, one-sequence forward pass of the Llama / Qwen2 / Qwen3 / Gemma 2 and 3 / OLMo 2 / GLM-4 decoder
 * (tools/tiny-models.ts's Gemma config form),
 * written straight from the transformers modelling code with no shared code with the ONNX
 * graph builder. Tests compare the graph against it, so a bug the graph shares with the KV
 * cache path (which agreement tests cannot see) still shows.
 */
import type { TinyModel } from '../../tools/tiny-models.js';

type Mat = { shape: number[]; data: Float32Array };

export function referenceLogits(model: TinyModel, ids: number[]): number[][] {
  const c = model.config as Record<string, number & boolean & string>;
  const H = c.hidden_size, nH = c.num_attention_heads, nKV = c.num_key_value_heads, d = c.head_dim;
  const family = c.model_type as string;
  const gemma3 = family === 'gemma3_text', gemma2 = family === 'gemma2';
  const gemma = gemma2 || gemma3;
  // Gemma 2's soft-caps: c·tanh(x / c) on attention's scaled scores and on the logits.
  const cap = (x: number, c: number | null | undefined) => (c ? c * Math.tanh(x / c) : x);
  const olmo = family === 'olmo2'; // norms after each branch only; q and k normed across the whole projection
  // GLM-4: RoPE over adjacent pairs on the first partial_rotary_factor of each head; four norms; gate/up fused.
  const glm = family === 'glm4';
  const rotary = glm ? d * (c.partial_rotary_factor as number) : d;
  const eps = c.rms_norm_eps;
  // Gemma 3: the layers before each sliding_window_pattern-th slide, at their own RoPE base, unscaled;
  // Gemma 2: every other layer slides, one base for all.
  const slides = (l: number) => gemma && (l + 1) % (gemma2 ? 2 : c.sliding_window_pattern) !== 0;
  const ropeOf = (l: number) => (slides(l) && gemma3 ? { theta: c.rope_local_base_freq, factor: 1 } : { theta: c.rope_theta, factor: gemma3 ? (c.rope_scaling as unknown as { factor: number }).factor : 1 });
  const w = (name: string): Mat => {
    const t = model.weights.get(name);
    if (!t) throw new Error(`reference: no weight ${name}`);
    return t;
  };
  const linear = (x: number[], name: string, bias?: string): number[] => {
    const W = w(name);
    const [out, inp] = W.shape as [number, number];
    const b = bias && model.weights.has(bias) ? w(bias).data : undefined;
    return Array.from({ length: out }, (_, o) => {
      let s = b ? b[o]! : 0;
      for (let i = 0; i < inp; i++) s += W.data[o * inp + i]! * x[i]!;
      return s;
    });
  };
  const rms = (x: number[], name: string): number[] => {
    const g = w(name).data;
    const ms = x.reduce((a, v) => a + v * v, 0) / x.length;
    const inv = 1 / Math.sqrt(ms + eps);
    return x.map((v, i) => v * inv * (gemma ? 1 + g[i]! : g[i]!));
  };
  const rope = (x: number[], pos: number, { theta, factor }: { theta: number; factor: number }): number[] => {
    const half = rotary / 2;
    return x.map((v, i) => {
      if (i >= rotary) return v;
      const j = glm ? Math.floor(i / 2) : i % half;
      const angle = pos / factor / theta ** ((2 * j) / rotary);
      const rotated = glm ? (i % 2 ? x[i - 1]! : -x[i + 1]!) : i < half ? -x[i + half]! : x[i - half]!;
      return v * Math.cos(angle) + rotated * Math.sin(angle);
    });
  };
  const E = w('model.embed_tokens.weight');
  let hs = ids.map((id) => Array.from(E.data.subarray(id * H, (id + 1) * H), (v) => (gemma ? v * Math.sqrt(H) : v)));
  const gelu = (x: number) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    const keys: number[][][] = [], values: number[][][] = [], queries: number[][][] = [];
    hs.forEach((h, t) => {
      const x = olmo ? h : rms(h, `${p}.input_layernorm.weight`);
      const split = (v: number[], n: number) => Array.from({ length: n }, (_, k) => v.slice(k * d, (k + 1) * d));
      const whole = (y: number[], norm: string) => (olmo ? rms(y, `${p}.self_attn.${norm}.weight`) : y);
      let q = split(whole(linear(x, `${p}.self_attn.q_proj.weight`, `${p}.self_attn.q_proj.bias`), 'q_norm'), nH);
      let k = split(whole(linear(x, `${p}.self_attn.k_proj.weight`, `${p}.self_attn.k_proj.bias`), 'k_norm'), nKV);
      const v = split(linear(x, `${p}.self_attn.v_proj.weight`, `${p}.self_attn.v_proj.bias`), nKV);
      if (family === 'qwen3' || gemma3) {
        q = q.map((hq) => rms(hq, `${p}.self_attn.q_norm.weight`));
        k = k.map((hk) => rms(hk, `${p}.self_attn.k_norm.weight`));
      }
      queries.push(q.map((hq) => rope(hq, t, ropeOf(l))));
      keys.push(k.map((hk) => rope(hk, t, ropeOf(l))));
      values.push(v);
    });
    hs = hs.map((h, t) => {
      const attn: number[] = [];
      for (let head = 0; head < nH; head++) {
        const kv = Math.floor(head / (nH / nKV));
        const scale = gemma ? 1 / Math.sqrt(c.query_pre_attn_scalar) : 1 / Math.sqrt(d);
        const seen = (s: number) => !slides(l) || t - s < c.sliding_window;
        const scores = Array.from({ length: t + 1 }, (_, s) => (seen(s) ? cap(queries[t]![head]!.reduce((a, qv, i) => a + qv * keys[s]![kv]![i]!, 0) * scale, c.attn_logit_softcapping) : -Infinity));
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let i = 0; i < d; i++) attn.push(e.reduce((a, p, s) => a + (p / z) * values[s]![kv]![i]!, 0));
      }
      let o = linear(attn, `${p}.self_attn.o_proj.weight`);
      if (gemma || olmo) o = rms(o, `${p}.post_attention_layernorm.weight`);
      if (glm) o = rms(o, `${p}.post_self_attn_layernorm.weight`);
      const h1 = h.map((v, i) => v + o[i]!);
      const y = olmo ? h1 : rms(h1, `${p}.${gemma ? 'pre_feedforward_layernorm' : 'post_attention_layernorm'}.weight`);
      // GLM-4's gate_up_proj: gate's rows, then up's.
      const gateUp = glm ? linear(y, `${p}.mlp.gate_up_proj.weight`) : [];
      const gate = glm ? gateUp.slice(0, gateUp.length / 2) : linear(y, `${p}.mlp.gate_proj.weight`);
      const up = glm ? gateUp.slice(gateUp.length / 2) : linear(y, `${p}.mlp.up_proj.weight`);
      const act = gate.map((g, i) => (gemma ? gelu(g) : g / (1 + Math.exp(-g))) * up[i]!);
      let down = linear(act, `${p}.mlp.down_proj.weight`);
      if (gemma || olmo) down = rms(down, `${p}.post_feedforward_layernorm.weight`);
      if (glm) down = rms(down, `${p}.post_mlp_layernorm.weight`);
      return h1.map((v, i) => v + down[i]!);
    });
  }
  const head = model.weights.has('lm_head.weight') ? 'lm_head.weight' : 'model.embed_tokens.weight';
  return hs.map((h) => linear(rms(h, 'model.norm.weight'), head).map((z) => cap(z, c.final_logit_softcapping)));
}

/** log_softmax(logits)[target], in float64. */
export function logSoftmaxAt(logits: number[], target: number): number {
  const m = Math.max(...logits);
  const lse = m + Math.log(logits.reduce((a, v) => a + Math.exp(v - m), 0));
  return logits[target]! - lse;
}
