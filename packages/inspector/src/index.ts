// @polish/inspector: the local inspection page and its server, and the @statelyai/inspect feed.
export { startInspector, type Inspector, type InspectorOptions } from './server.js';
export {
  buildRunView,
  summarizeRun,
  machineGraph,
  type RunView,
  type RunSummaryView,
  type MachineGraph,
  type TimelineEntry,
} from './run-view.js';
export { createNatsStatelyInspector, createStatelySkyInspector, type InspectObserver } from './stately.js';
