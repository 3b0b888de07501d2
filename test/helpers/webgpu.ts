import { GraphBuilder } from '../../src-main/graph/ir.js';
import { createSession } from '../../src-main/model/ort-session.js';

/**
 * Whether a WebGPU session starts on this machine (Mesa's lavapipe on the build machines, which
 * .ci/run installs). When not, says so once in the log, naming the test file `who` and what it
 * checks instead (`otherwise`).
 */
export async function webGpuAnswers(who: string, otherwise: string): Promise<boolean> {
  try {
    const b = new GraphBuilder('probe');
    b.output(b.identityAs(b.input('x', 'float32', [1]), 'y'));
    await (await createSession(b.graph, { device: 'webgpu' })).session.release();
    return true;
  } catch (err) {
    console.info(`${who}: no WebGPU adapter here, so ${otherwise}: ${(err as Error).message}`);
    return false;
  }
}
