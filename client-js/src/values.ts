/**
 * What a report's value becomes for its randomizer (client/values.py): a number (numeric
 * campaigns; clipped later), open-domain text within max_length, or a label's index.
 */

import type { CampaignConfig } from "./config.js";
import { LdptelError } from "./errors.js";
import type { Value } from "./randomize.js";
import { openValue } from "./wire.js";

/** The value checked against the campaign (throws invalid_value). */
export function valueOf(config: CampaignConfig, value: unknown): Value {
  if (config.range !== null) {
    if (typeof value !== "number" || Number.isNaN(value)) {
      throw new LdptelError("invalid_value", "value", "must be a number (not NaN)");
    }
    return value;
  }
  if (typeof value !== "string") throw new LdptelError("invalid_value", "value", `must be a string, got ${typeof value}`);
  if (config.maxLength !== null) {
    const checked = openValue(value, config.maxLength);
    if ("reason" in checked) throw new LdptelError("invalid_value", "value", checked.reason);
    return checked.text;
  }
  let index = config.indexOf(value);
  if (index < 0 && config.otherLabel !== null) index = config.indexOf(config.otherLabel);
  if (index < 0) throw new LdptelError("invalid_value", "value", "is not in the campaign's domain");
  return index;
}
