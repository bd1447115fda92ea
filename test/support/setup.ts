import { afterAll } from 'vitest';
import { killStarted } from './processes.js';

// A test that times out never reaches its finally blocks: stop what it started anyway.
afterAll(() => killStarted());
