/**
 * A campaign's served config (GET /v1/campaigns/<name>; docs/protocol.md, "Campaign
 * config"), validated at the boundary: its id checked against the canonical JSON, every
 * served parameter checked by the oracle it builds, per privacy level.
 */

import { HistogramEncoding } from "./histogram.js";
import { itemKey } from "./hash.js";
import { NumericMechanism } from "./numeric.js";
import {
  ConfigError,
  CountMeanSketch,
  DirectEncoding,
  HadamardCountMeanSketch,
  HadamardResponse,
  type IndexOracle,
  type KeyedOracle,
  LocalHashing,
  type Params,
  PrefixExtending,
  Rappor,
  SubsetSelection,
  UnaryEncoding,
} from "./oracles.js";
import { TreeShape } from "./tree.js";
import { configId, labelProblem } from "./wire.js";

export const MEMO_NONE = "none";
export const MEMO_EXACT = "exact_discloses_changes";
export const MEMO_TREE = "tree";
/** A campaign without lifetime_epsilon gets this many times its epsilon per install. */
export const DEFAULT_LIFETIME_FACTOR = 10;
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export type Built =
  | { kind: "index"; oracle: IndexOracle }
  | { kind: "key"; oracle: KeyedOracle }
  | { kind: "rappor"; oracle: Rappor }
  | { kind: "pem"; oracle: PrefixExtending }
  | { kind: "numeric"; oracle: NumericMechanism }
  | { kind: "tree"; oracle: TreeShape };

/** A level that is not one of the campaign's, missing, or given for a campaign without. */
export class LevelError extends Error {
  constructor(readonly reason: string) {
    super(`level: ${reason}`);
    this.name = "LevelError";
  }
}

export interface Budget {
  reportsPerWindow: number;
  windowEpsilon: number;
  lifetimeEpsilon: number;
}

/** A finite epsilon > 0 (a one-report epsilon is also at most 20: `reportEpsilon`). */
function positive(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || !(value > 0)) {
    throw new ConfigError(field, "must be a finite number > 0");
  }
  return value;
}

function reportEpsilon(value: unknown, field: string): number {
  const eps = positive(value, field);
  if (eps > 20) throw new ConfigError(field, "must be <= 20 (no meaningful privacy above)");
  return eps;
}

function integer(value: unknown, field: string, low: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < low) {
    throw new ConfigError(field, `must be an integer >= ${low}`);
  }
  return value;
}

function object(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConfigError(field, "must be an object");
  }
  return value as Record<string, unknown>;
}

/** The served config_id, checked against the config's canonical JSON. */
function verifiedId(data: Record<string, unknown>): string {
  const claimed = data["config_id"];
  if (typeof claimed !== "string") throw new ConfigError("config_id", "is required");
  let computed: string;
  try {
    computed = configId(data);
  } catch {
    throw new ConfigError("config", "is not representable as canonical JSON");
  }
  // A config created before ids hashed RFC 8785 JSON keeps a legacy id this client cannot
  // recompute (a parsed number does not say whether it was written 1 or 1.0): refused.
  if (computed !== claimed) throw new ConfigError("config_id", "does not match the config");
  return claimed;
}

/** A numeric campaign's [low, high] (null: not numeric). */
function rangeOf(range: unknown): [number, number] | null {
  if (range === undefined) return null;
  if (!Array.isArray(range) || range.length !== 2 || !range.every((x) => typeof x === "number" && Number.isFinite(x)) || !(range[0] < range[1])) {
    throw new ConfigError("range", "must be [low, high] with low < high");
  }
  return [range[0] as number, range[1] as number];
}

/** A closed domain: at least 2 distinct labels. */
function domainOf(domain: unknown): string[] {
  if (!Array.isArray(domain) || domain.length < 2 || !domain.every((l) => typeof l === "string" && !labelProblem(l))) {
    throw new ConfigError("domain", "must be a list of at least 2 labels");
  }
  const labels = domain as string[];
  if (new Set(labels).size !== labels.length) throw new ConfigError("domain", "labels must be distinct");
  return labels;
}

/** The privacy levels: each one's epsilon (at most the config's), the strategy, its
 * threshold, and per-level params. */
function levelRules(
  data: Record<string, unknown>,
  epsilon: number,
): { levels: Record<string, number>; strategy: string; threshold: number | null; params: Record<string, Params> } {
  const levels: Record<string, number> = {};
  for (const [level, eps] of Object.entries(object(data["levels"] ?? {}, "levels"))) {
    levels[level] = positive(eps, `levels.${level}`);
    if ((levels[level] as number) > epsilon) throw new ConfigError("levels", "level epsilons must be <= epsilon");
  }
  const strategy = data["level_strategy"] ?? "optimal";
  if (strategy !== "optimal" && strategy !== "minimum" && strategy !== "threshold") {
    throw new ConfigError("level_strategy", "must be optimal, minimum or threshold");
  }
  const raw = data["level_threshold"];
  const threshold = raw === undefined || raw === null ? null : positive(raw, "level_threshold");
  if (strategy === "threshold" && threshold === null) throw new ConfigError("level_threshold", "is required by threshold");
  const params: Record<string, Params> = {};
  for (const [level, p] of Object.entries(object(data["level_params"] ?? {}, "level_params"))) {
    if (!(level in levels)) throw new ConfigError("level_params", `unknown level ${level}`);
    params[level] = object(p, `level_params.${level}`);
  }
  return { levels, strategy, threshold, params };
}

export class CampaignConfig {
  readonly name: string;
  readonly oracle: string;
  readonly epsilon: number;
  readonly configId: string;
  readonly domain: string[];
  readonly maxLength: number | null;
  readonly range: [number, number] | null;
  readonly params: Params;
  readonly levelParams: Record<string, Params>;
  readonly levels: Record<string, number>;
  readonly levelStrategy: string;
  readonly levelThreshold: number | null;
  readonly windowSeconds: number;
  readonly reportsPerWindow: number;
  readonly lifetimeEpsilon: number | null;
  readonly otherLabel: string | null;
  readonly memoization: string;
  /** Memoization "tree": the horizon T and the tracked changes K (served). */
  readonly horizonWindows: number;
  readonly maxChanges: number;
  private readonly built = new Map<string, Built>();
  private keys: bigint[] | null = null;
  private indexes: Map<string, number> | null = null;

  /** Validate a served answer (the config plus its config_id); throws ConfigError. */
  constructor(answer: unknown) {
    const data = object(answer, "config");
    this.configId = verifiedId(data);
    const name = data["name"];
    if (typeof name !== "string" || !NAME.test(name)) throw new ConfigError("name", "is not a campaign name");
    this.name = name;
    const oracle = data["oracle"];
    if (typeof oracle !== "string") throw new ConfigError("oracle", "must be a string");
    this.oracle = oracle === "rappor-basic" ? "sue" : oracle;
    this.epsilon = reportEpsilon(data["epsilon"], "epsilon");
    this.params = object(data["params"] ?? {}, "params");
    this.windowSeconds = integer(data["window_seconds"], "window_seconds", 60, 86_400);
    this.reportsPerWindow = integer(data["reports_per_window"], "reports_per_window", 1, 1);
    const lifetime = data["lifetime_epsilon"];
    this.lifetimeEpsilon = lifetime === undefined || lifetime === null ? null : positive(lifetime, "lifetime_epsilon");
    const memo = data["memoization"] ?? MEMO_NONE;
    if (memo !== MEMO_NONE && memo !== MEMO_EXACT && memo !== MEMO_TREE) throw new ConfigError("memoization", "unknown mode");
    this.memoization = memo;
    // An (epsilon, delta) lifetime budget is the Python client's optimal-composition
    // accountant, which this client does not implement: such a config is refused rather
    // than charged by another rule.
    if (data["lifetime_delta"] !== undefined && data["lifetime_delta"] !== null) {
      throw new ConfigError("lifetime_delta", "an (epsilon, delta) lifetime budget is not supported by this client");
    }
    this.horizonWindows = memo === MEMO_TREE ? integer(data["horizon_windows"], "horizon_windows", 1, 0) : 0;
    this.maxChanges = memo === MEMO_TREE ? integer(data["max_changes"], "max_changes", 1, 0) : 0;
    this.maxLength = data["max_length"] === undefined ? null : integer(data["max_length"], "max_length", 1, 0);
    this.range = rangeOf(data["range"]);
    this.domain = this.maxLength === null && this.range === null ? domainOf(data["domain"]) : [];
    const other = data["other_label"];
    if (other !== undefined && other !== null && (typeof other !== "string" || !this.domain.includes(other))) {
      throw new ConfigError("other_label", "must be null or a label of the domain");
    }
    this.otherLabel = typeof other === "string" ? other : null;
    const rules = levelRules(data, this.epsilon);
    this.levels = rules.levels;
    this.levelStrategy = rules.strategy;
    this.levelThreshold = rules.threshold;
    this.levelParams = rules.params;
    // Every level's oracle is built now, so a served value that fails a check refuses the
    // whole config (nothing is sent under it).
    if (Object.keys(this.levels).length === 0) this.mechanism("");
    for (const level of Object.keys(this.levels)) {
      if (this.reportingEpsilon(level) !== null) this.mechanism(level);
    }
  }

  get hasLevels(): boolean {
    return Object.keys(this.levels).length > 0;
  }

  /** The epsilon a user at `level` randomizes with (null: the level does not report);
   * throws LevelError for a level missing, unknown, or given without levels. */
  reportingEpsilon(level: string): number | null {
    if (!this.hasLevels) {
      if (level) throw new LevelError(`campaign ${this.name} declares no privacy levels`);
      return this.epsilon;
    }
    if (!level) throw new LevelError(`campaign ${this.name} requires a privacy level`);
    const own = this.levels[level];
    if (own === undefined) throw new LevelError(`${JSON.stringify(level)} is not a privacy level`);
    if (this.levelStrategy === "minimum") return Math.min(...Object.values(this.levels));
    if (this.levelStrategy === "threshold") {
      const t = this.levelThreshold as number;
      return own >= t ? t : null;
    }
    return own;
  }

  /** The limits of a client reporting at `level` (scaled by its epsilon / the config's;
   * null: the config's own). */
  budget(level: string | null): Budget {
    const eps = level === null ? this.epsilon : (this.reportingEpsilon(level) ?? this.epsilon);
    const scale = eps / this.epsilon;
    const lifetime = this.lifetimeEpsilon ?? DEFAULT_LIFETIME_FACTOR * this.epsilon;
    return {
      reportsPerWindow: this.reportsPerWindow,
      windowEpsilon: scale * this.epsilon * this.reportsPerWindow,
      lifetimeEpsilon: scale * lifetime,
    };
  }

  /** A label's index in the domain (-1 if absent). */
  indexOf(label: string): number {
    this.indexes ??= new Map(this.domain.map((l, i) => [l, i]));
    return this.indexes.get(label) ?? -1;
  }

  windowOf(timestamp: number): number {
    return Math.floor(timestamp / this.windowSeconds) * this.windowSeconds;
  }

  private itemKeys(): bigint[] {
    this.keys ??= this.domain.map(itemKey);
    return this.keys;
  }

  /** The oracle a level's reports are drawn with (its served params and level_params). */
  mechanism(level: string): Built {
    const cached = this.built.get(level);
    if (cached) return cached;
    const eps = this.reportingEpsilon(level);
    if (eps === null) throw new LevelError(`level ${level} does not report`);
    const params = { ...this.params, ...(this.levelParams[level] ?? {}) };
    const built = this.build(params, eps);
    this.built.set(level, built);
    return built;
  }

  private build(params: Params, eps: number): Built {
    const d = this.domain.length;
    if (this.memoization === MEMO_TREE) {
      if (this.oracle !== "de" || d < 2 || this.hasLevels || this.reportsPerWindow !== 1) {
        throw new ConfigError("memoization", 'memoization "tree" is oracle de, a domain, one report per window, no levels');
      }
      if (this.horizonWindows > 16384 || this.maxChanges > 64 || this.maxChanges > this.horizonWindows) {
        throw new ConfigError("horizon_windows", "out of range");
      }
      return { kind: "tree", oracle: new TreeShape(this.horizonWindows, this.maxChanges, eps, d === 2 ? 1 : d) };
    }
    if (this.range) {
      return { kind: "numeric", oracle: new NumericMechanism(this.oracle, this.range[0], this.range[1], params, eps) };
    }
    if (this.maxLength !== null) {
      switch (this.oracle) {
        case "pem":
          return { kind: "pem", oracle: new PrefixExtending(this.maxLength, params, eps) };
        case "cms":
          return { kind: "key", oracle: new CountMeanSketch([], params, eps) };
        case "hcms":
          return { kind: "key", oracle: new HadamardCountMeanSketch([], params, eps) };
        case "olh":
          return { kind: "key", oracle: new LocalHashing([], params, eps, false) };
        default:
          throw new ConfigError("oracle", `${this.oracle} does not take free text`);
      }
    }
    switch (this.oracle) {
      case "de":
        return { kind: "index", oracle: new DirectEncoding(d, params, eps) };
      case "sue":
      case "oue":
        return { kind: "index", oracle: new UnaryEncoding(d, params, eps) };
      case "olh":
      case "blh":
        return { kind: "index", oracle: new LocalHashing(this.itemKeys(), params, eps, this.oracle === "blh") };
      case "hr":
        return { kind: "index", oracle: new HadamardResponse(d, params, eps) };
      case "ss":
        return { kind: "index", oracle: new SubsetSelection(d, params, eps) };
      case "cms":
        return { kind: "index", oracle: new CountMeanSketch(this.itemKeys(), params, eps) };
      case "hcms":
        return { kind: "index", oracle: new HadamardCountMeanSketch(this.itemKeys(), params, eps) };
      case "she":
      case "the":
        return { kind: "index", oracle: new HistogramEncoding(d, params, eps) };
      case "rappor":
        return { kind: "rappor", oracle: new Rappor(this.domain, params, eps) };
      default:
        throw new ConfigError("oracle", `unknown oracle ${this.oracle}`);
    }
  }
}
