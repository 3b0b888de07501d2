// `hindsight train`: trains a LoRA adapter with Binary RL, On-Policy Distillation or
// both, through ONNX Runtime in a worker thread. Without --data it trains on the database's
// labelled samples; --out receives the PEFT adapter, trainer_log.jsonl, dataset.jsonl and
// checkpoints/. Progress goes to stderr; --json prints the result as one object.
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import type { TrainingSample } from '../../src-shared/views.js';
import { withWorkspace } from '../workspace/workspace.js';
import { parseTargets } from '../train/lora.js';
import { startTraining } from '../train/run-in-worker.js';
import type { TrainerEvent, TrainerOptions } from '../train/trainer.js';
import { defaultEpsHigh, OPTIMIZER_KINDS, TRAIN_DEFAULTS as D, TRAIN_METHODS, type OptimizerKind, type TrainMethod } from '../../src-shared/training.js';
import { defaultDbPath, intFlag, numberFlag, parseCommandArgs, printJson, UsageError, type Command } from './args.js';
import { deviceFlag } from './generate.js';

const USAGE = `usage: hindsight train --model DIR --out ADAPTER_DIR [--data IN.jsonl] [options] [--db PATH] [--json]
       hindsight train --resume RUN_DIR [options to change] [--json]
  --method M           ${TRAIN_METHODS.join('|')}: Binary RL, On-Policy Distillation or both (default ${D.method})
  --data IN.jsonl      pre-tokenised rows; without it, the database's labelled samples
  --steps N            optimizer updates (default one epoch: ⌈rows / batch size⌉)
  --batch-size B       samples per update (default ${D.batchSize})
  --lr X               learning rate, constant (default ${D.lr.toExponential()})
  --optimizer O        ${OPTIMIZER_KINDS.join('|')} (default ${D.optimizer}; AdamW betas ${D.betas.join('/')}, eps ${D.adamEps})
  --max-grad-norm X    global gradient-norm clip, 0 off (default ${D.maxGradNorm})
  --lora-r R           LoRA rank (default ${D.loraR})
  --lora-alpha A       LoRA alpha; scaling alpha / r (default ${D.loraAlpha})
  --targets LIST       adapted linears (default ${D.targets.join(',')}; or all)
  --init-adapter DIR   start from this PEFT adapter (its r, alpha and targets)
  --eps-low X          PPO-clip lower epsilon (default ${D.epsLow})
  --eps-high X         PPO-clip upper epsilon (default ${defaultEpsHigh('rl')}; ${defaultEpsHigh('opd')} with --method opd)
  --kl-beta X          k3 KL penalty against the base model (default ${D.klBeta})
  --w-opd X, --w-rl X  combine's weights of the teacher gap and the reward (default ${D.wOpd}, ${D.wRl})
  --max-length N       tokens per row (default ${D.maxLength}, at most the model's own)
  --seed S             data order and LoRA initialisation (default ${D.seed})
  --device cpu|cuda    where the step runs (default ${D.device})
  --threads N          ONNX Runtime intra-op threads (default: its own choice)
  --save-every N       checkpoint every N steps and at the end, 0 only at the end (default ${D.saveEvery})
  --resume DIR         continue the run in DIR from its last checkpoint, with every option it was
                       started with except those given again (--out defaults to DIR, --model to its model)
  --overwrite          start over in an --out folder that holds a run (the old run is removed)
  --merge              also write the merged weights under ADAPTER_DIR/merged

An --out folder that already holds a run is never written over silently: continue it with
--resume, or start over with --overwrite.`;

function optionalNumber(name: string, value: string | undefined): number | undefined {
  return value === undefined ? undefined : numberFlag(name, value, 0);
}

function optionalInt(name: string, value: string | undefined, min: number): number | undefined {
  return value === undefined ? undefined : intFlag(name, value, 0, min);
}

function describe(event: TrainerEvent): string | null {
  if (event.type === 'status') return event.message;
  if (event.type === 'executionProvider') return `execution provider: ${event.name}`;
  const l = event.log;
  const gap = l.teacher_student_gap === null ? '' : ` gap ${l.teacher_student_gap.toFixed(4)}`;
  return `step ${l.step}/${l.total_steps} loss ${l.loss.toFixed(4)} reward ${l.reward_mean.toFixed(2)} adv ${l.adv_mean.toFixed(4)}${gap} ` +
    `kl ${l.approx_kl.toExponential(2)} clip ${l.clipfrac.toFixed(3)} |g| ${l.grad_norm.toFixed(4)} ${l.tokens_per_s.toFixed(0)} tok/s eta ${l.eta_s.toFixed(0)} s`;
}

/** The database's samples for `method`; refuses, naming what is missing, when it gives nothing to learn from. */
async function databaseSamples(db: string, method: TrainMethod): Promise<TrainingSample[]> {
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first, or give --data FILE`);
  return withWorkspace(db, (ws) => {
    const nothing = ws.nothingToTrain(method);
    if (nothing) throw new UserError(nothing);
    return ws.trainingSamples({ method });
  }, { access: 'read' });
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, {
    model: { type: 'string' }, out: { type: 'string' }, data: { type: 'string' }, method: { type: 'string' },
    steps: { type: 'string' }, 'batch-size': { type: 'string' }, lr: { type: 'string' }, optimizer: { type: 'string' },
    'lora-r': { type: 'string' }, 'lora-alpha': { type: 'string' }, targets: { type: 'string' }, 'init-adapter': { type: 'string' },
    seed: { type: 'string' }, device: { type: 'string' }, 'save-every': { type: 'string' }, resume: { type: 'string' },
    'max-grad-norm': { type: 'string' }, 'kl-beta': { type: 'string' }, 'max-length': { type: 'string' }, 'w-opd': { type: 'string' },
    'w-rl': { type: 'string' }, 'eps-low': { type: 'string' }, 'eps-high': { type: 'string' }, threads: { type: 'string' },
    merge: { type: 'boolean' }, overwrite: { type: 'boolean' },
  });
  if (v.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  // Unset options stay undefined: a new run takes the defaults, a resumed run its own.
  if (!v.resume && (!v.model || !v.out)) throw new UsageError(`--model and --out are required (or --resume DIR)\n${USAGE}`);
  if (v.method !== undefined && !TRAIN_METHODS.includes(v.method as TrainMethod)) throw new UsageError(`--method must be rl, opd or combine, got '${v.method}'`);
  if (v.optimizer !== undefined && !OPTIMIZER_KINDS.includes(v.optimizer as OptimizerKind)) throw new UsageError(`--optimizer must be adamw or sgd, got '${v.optimizer}'`);
  let targets;
  try {
    targets = v.targets === undefined ? undefined : parseTargets(v.targets);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const options: TrainerOptions = {
    modelDir: v.model,
    outDir: v.out,
    dataFile: v.data,
    method: v.method as TrainMethod | undefined,
    steps: optionalInt('steps', v.steps, 1),
    batchSize: optionalInt('batch-size', v['batch-size'], 1),
    lr: optionalNumber('lr', v.lr),
    optimizer: v.optimizer as OptimizerKind | undefined,
    loraR: optionalInt('lora-r', v['lora-r'], 1),
    loraAlpha: optionalNumber('lora-alpha', v['lora-alpha']),
    targets,
    initAdapter: v['init-adapter'],
    seed: optionalInt('seed', v.seed, 0),
    device: v.device === undefined ? undefined : deviceFlag(v.device),
    threads: optionalInt('threads', v.threads, 1),
    saveEvery: optionalInt('save-every', v['save-every'], 0),
    resume: v.resume,
    overwrite: v.overwrite,
    maxGradNorm: optionalNumber('max-grad-norm', v['max-grad-norm']),
    klBeta: optionalNumber('kl-beta', v['kl-beta']),
    maxLength: optionalInt('max-length', v['max-length'], 2),
    wOpd: optionalNumber('w-opd', v['w-opd']),
    wRl: optionalNumber('w-rl', v['w-rl']),
    epsLow: optionalNumber('eps-low', v['eps-low']),
    epsHigh: optionalNumber('eps-high', v['eps-high']),
    merge: v.merge,
  };
  if (options.resume && (options.initAdapter || options.dataFile)) throw new UsageError('--resume continues a run as it was: it takes no --init-adapter or --data');
  if (!options.dataFile && !options.resume) options.samples = await databaseSamples(v.db ?? defaultDbPath(), options.method ?? D.method);
  const controller = new AbortController();
  const onSignal = () => {
    process.stderr.write('stopping after the current step (a checkpoint is kept)…\n');
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  try {
    const result = await startTraining(options, {
      signal: controller.signal,
      onEvent: (e) => {
        const line = describe(e);
        if (line) process.stderr.write(line + '\n');
      },
    });
    process.stderr.write(`${result.status}: ${result.steps}/${result.totalSteps} steps on ${result.executionProvider}; adapter in ${result.adapterDir}\n`);
    if (v.json) {
      printJson({
        status: result.status, steps: result.steps, total_steps: result.totalSteps, execution_provider: result.executionProvider,
        adapter_dir: result.adapterDir, checkpoint_dir: result.checkpointDir, log: result.logFile, rows: result.rows,
        skipped: result.skipped, truncated: result.truncated, last: result.last, merged_dir: result.mergedDir ?? null,
      });
    }
    return result.status === 'finished' ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
  }
};
