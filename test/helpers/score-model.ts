// One row's log-probs from a model folder or GGUF file, through LocalModel (loaded, scored, closed):
// what the format tests compare a GGUF with its folder by.
import { LocalModel } from '../../src-main/model/local-model.js';

export async function scoreRow(model: string, row: { inputIds: number[]; responseStart: number }): Promise<number[]> {
  const m = await LocalModel.load(model);
  try {
    return (await m.score([row]))[0]!;
  } finally {
    await m.close();
  }
}
