import type { Usage } from '@polish/protocol';

/** A handler's validated result and the usage of every model call it made. */
export interface HandlerOutput<T> {
  value: T;
  usage: Usage;
}
