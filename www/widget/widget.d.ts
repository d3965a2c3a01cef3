// TypeScript types for widget.js: the <gpt2-generator> element (import 'gpt2-web/widget').
import type { Gpt2, GenerateResult, TokenEvent } from '../api/gpt2.js';

/** The element's attributes (all optional), as in widget.js's header. */
export declare const ATTRIBUTES: Record<string, boolean>;

export declare class Gpt2Generator extends HTMLElement {
  /**
   * The model this element uses; rejects when it did not load (a gpt2-error event said why).
   * Reading it starts the download whatever the load attribute ("visible" by default: when the
   * element comes near the viewport; "interaction": on the first focus or click; "eager").
   */
  readonly model: Promise<Gpt2>;
  /** Generates from the prompt box: the result, or null when it failed (see the gpt2-error event). */
  generate(): Promise<GenerateResult | null>;
  /** Stops the running generation (it ends with stopReason 'abort'). */
  stop(): void;
}

declare global {
  interface HTMLElementTagNameMap {
    'gpt2-generator': Gpt2Generator;
  }
  interface HTMLElementEventMap {
    'gpt2-token': CustomEvent<TokenEvent>;
    'gpt2-done': CustomEvent<GenerateResult>;
    'gpt2-error': CustomEvent<{ message: string }>;
  }
}
