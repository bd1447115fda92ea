import { z } from 'zod';
import type { ModelProvider } from './model-provider.js';
import { createScriptedProvider } from './scripted-provider.js';
import { loadScriptFile } from './script-file.js';

/**
 * How a worker builds its model: what a host hands its workers (never run state, never a key:
 * keys are read by the worker from its own environment).
 */
export const ModelSettingsSchema = z.discriminatedUnion('provider', [
  z.strictObject({ provider: z.literal('scripted'), script: z.string().min(1) }),
]);
export type ModelSettings = z.infer<typeof ModelSettingsSchema>;

/** Builds the model a worker uses from its settings. */
export function createModel(settings: ModelSettings): ModelProvider {
  switch (settings.provider) {
    case 'scripted':
      return createScriptedProvider(loadScriptFile(settings.script));
  }
}
