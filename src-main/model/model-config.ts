// The decoder's hyper-parameters, normalised across families: what ./hf-checkpoint.ts reads from
// config.json and ./gguf/model.ts from a GGUF's metadata. Apart from hf-checkpoint.ts (which
// re-exports them) so that the GGUF reader can name them without importing the checkpoint back.

export type ModelFamily = 'llama' | 'qwen2' | 'qwen3';

export type RopeScaling =
  | { type: 'linear'; factor: number }
  | { type: 'llama3'; factor: number; lowFreqFactor: number; highFreqFactor: number; originalMaxPositionEmbeddings: number };

/** The decoder's hyper-parameters, normalised across families. */
export interface ModelConfig {
  family: ModelFamily;
  architecture: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling?: RopeScaling;
  tieWordEmbeddings: boolean;
  /** Bias on q, k and v projections (Qwen2 always; Llama and Qwen3 with attention_bias). */
  qkvBias: boolean;
  /** Bias on the output projection (Llama and Qwen3 with attention_bias; Qwen2 never). */
  oBias: boolean;
  mlpBias: boolean;
  /** Qwen3: RMSNorm of each head's q and k before RoPE. */
  qkNorm: boolean;
  bosTokenId?: number;
  eosTokenIds: number[];
  maxPositionEmbeddings: number;
}
