// The same evaluator-optimizer loop as a polish run, written as a LangGraph.js graph that calls
// the same handlers in-process: the comparison point for the benchmark.
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { evaluate, revise } from '@polish/agents';
import { computeVerdict } from '@polish/orchestrator';

const State = Annotation.Root({
  spec: Annotation(),
  artifact: Annotation(),
  iteration: Annotation(),
  record: Annotation(),
});

/** Compiles the loop once for a model; each run passes its spec in the state. */
export function buildLangGraphLoop(model) {
  return new StateGraph(State)
    .addNode('evaluate', async ({ spec, artifact, iteration }) => {
      const { value } = await evaluate({ artifact, criteria: spec.criteria }, model);
      const next = iteration + 1;
      return {
        iteration: next,
        record: computeVerdict({
          iteration: next,
          artifact,
          criteria: spec.criteria,
          scores: value.scores,
          threshold: 'pass_all',
        }),
      };
    })
    .addNode('revise', async ({ spec, artifact, record }) => {
      const { value } = await revise({ artifact, blocking_gaps: record.blocking_gaps, goal: spec.goal }, model);
      return { artifact: value.artifact };
    })
    .addEdge(START, 'evaluate')
    .addConditionalEdges('evaluate', ({ spec, iteration, record }) =>
      record.overall === 'pass' || iteration >= spec.cap ? END : 'revise',
    )
    .addEdge('revise', 'evaluate')
    .compile();
}

/** Runs the loop to its end and returns the final state. */
export function runLangGraphLoop(graph, spec) {
  return graph.invoke({ spec, artifact: spec.artifact, iteration: 0, record: null }, { recursionLimit: 50 });
}
