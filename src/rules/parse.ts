export * from './parse/index.js';
