/**
 * The live-capture settings (src-main/capture/) as the settings file stores them, with their
 * defaults. The server's settings store starts from these defaults, and the Settings page's
 * capture form shows them until the server's values arrive, so both import them from here.
 * Node-free on purpose: the browser bundle loads this file.
 */
import { APP_TRAIN_DEFAULTS, TRAIN_DEFAULTS, type Precision, type Quantize, type TrainMethod } from './training.js';

export interface CaptureSettingFields {
  /** Off until the user turns it on. */
  captureEnabled: boolean;
  /** Proxy mode: forward /v1/chat/completions there instead of answering with the local model ('' = local). */
  captureUpstreamUrl: string;
  captureUpstreamModel: string;
  captureUpstreamApiKey: string;
  /** The background loop, opt-in: judge new captured samples, train every N labelled ones. */
  captureAutoJudge: boolean;
  captureAutoTrain: boolean;
  captureTrainEvery: number;
  /** Steps of each background run; 0 = one epoch over the new samples. */
  captureTrainSteps: number;
  captureTrainMethod: TrainMethod;
  /** The base stored quantised in each background run (docs/design.md §QLoRA): a machine too small for the fp32 base trains on int4. */
  captureTrainQuantize: Quantize;
  /** The unquantised base's precision in each background run (docs/design.md §Precision); null: the device's default. */
  captureTrainPrecision: Precision | null;
}

export const CAPTURE_SETTING_DEFAULTS: Readonly<CaptureSettingFields> = {
  captureEnabled: false,
  captureUpstreamUrl: '',
  captureUpstreamModel: '',
  captureUpstreamApiKey: '',
  captureAutoJudge: false,
  captureAutoTrain: false,
  captureTrainEvery: 16,
  captureTrainSteps: 0,
  captureTrainMethod: APP_TRAIN_DEFAULTS.method,
  captureTrainQuantize: TRAIN_DEFAULTS.quantize,
  captureTrainPrecision: null,
};
