import { existsSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { PolishError, type Usage } from '@polish/protocol';
import { textOf, type ModelProvider, type ModelRequest, type ModelResponse } from './model-provider.js';
import type { ScriptFile, ScriptRule } from './script-file.js';

/** A function that answers for the scripted model: an object is sent as JSON, a string as is. */
export type ScriptFunction = (request: ModelRequest) => unknown;

/** Rough token count for scripted usage: deterministic, and clearly not a real tokenizer. */
const tokens = (text: string) => Math.ceil(text.length / 4);

function scriptedUsage(request: ModelRequest, answer: string): Usage {
  const prompt = request.system + request.messages.map((message) => textOf(message.content)).join('');
  return {
    input_tokens: tokens(prompt),
    output_tokens: tokens(answer),
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    model_calls: 1,
  };
}

function matches(rule: ScriptRule, payload: Readonly<Record<string, unknown>>): boolean {
  const when = rule.when ?? {};
  // A PAR artifact is a map of files: its text is every path and content.
  const artifact =
    typeof payload.artifact === 'string'
      ? payload.artifact
      : Object.entries((payload.artifact ?? {}) as Record<string, string>)
          .map(([path, content]) => `${path}\n${content}`)
          .join('\n');
  const history = Array.isArray(payload.history)
    ? (payload.history as { plan_summary: string; critique: string }[])
    : [];
  const goal = typeof payload.goal === 'string' ? payload.goal : '';
  const gaps = Array.isArray(payload.blocking_gaps) ? payload.blocking_gaps.map(String) : [];
  const lessons = Array.isArray(payload.lessons)
    ? (payload.lessons as { lesson: string }[]).map((entry) => entry.lesson)
    : [];
  return (
    (when.artifact_contains === undefined || artifact.includes(when.artifact_contains)) &&
    (when.artifact_not_contains === undefined || !artifact.includes(when.artifact_not_contains)) &&
    (when.goal_contains === undefined || goal.includes(when.goal_contains)) &&
    (when.gaps_contain === undefined || gaps.some((gap) => gap.includes(when.gaps_contain ?? ''))) &&
    (when.history_length === undefined || history.length === when.history_length) &&
    (when.lessons_contain === undefined || lessons.some((lesson) => lesson.includes(when.lessons_contain ?? ''))) &&
    (when.history_contains === undefined ||
      history.some((cycle) => `${cycle.plan_summary}\n${cycle.critique}`.includes(when.history_contains ?? '')))
  );
}

/** Resolves once `path` exists; watches its folder rather than polling. */
function fileExists(path: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(dirname(path), (_event, name) => {
      if ((name === null || name === basename(path)) && existsSync(path)) done();
    });
    const done = () => {
      watcher.close();
      resolve();
    };
    // Checked after the watcher exists, so a file created in between is not missed.
    if (existsSync(path)) done();
  });
}

const asText = (answer: unknown) => (typeof answer === 'string' ? answer : JSON.stringify(answer));

/**
 * The scripted model: answers come from a script (see `ScriptFileSchema`) or a function,
 * never from an LLM, and its `info.scripted` is always true so every output says so.
 * It keeps no state between calls: the answer is a function of the request alone, so a
 * script works the same across single-use worker processes.
 */
export function createScriptedProvider(source: ScriptFile | ScriptFunction): ModelProvider {
  const name = typeof source === 'function' ? 'function' : (source.name ?? 'script');
  return {
    info: { provider: 'scripted', model: `scripted:${name}`, scripted: true },
    async generate(request: ModelRequest): Promise<ModelResponse> {
      if (typeof source === 'function') {
        const text = asText(await source(request));
        return { text, usage: scriptedUsage(request, text) };
      }
      const rules = request.role === 'par.command' ? undefined : source[request.role];
      const rule = (rules ?? []).find((candidate) => matches(candidate, request.payload));
      if (!rule) {
        throw new PolishError('MODEL_ERROR', `scripted model (${name}) has no ${request.role} rule matching this task`);
      }
      const round = request.messages.filter((message) => message.role === 'assistant').length;
      const answers = rule.answers ?? [rule.answer];
      const text = asText(answers[Math.min(round, answers.length - 1)]);
      // Synchronous on purpose: the worker's handler stays on the CPU without waiting on I/O.
      for (const until = performance.now() + (rule.busy_ms ?? 0); performance.now() < until;);
      if (rule.delay_ms) await delay(rule.delay_ms);
      if (rule.hold_until_file) await fileExists(rule.hold_until_file);
      return { text, usage: scriptedUsage(request, text) };
    },
  };
}
