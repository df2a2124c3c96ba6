// What the short browser scripts share: their environment, a headless Debian Chromium
// session, screenshots, and the pass/fail protocol browser.rs reads (a "<name> test: all
// steps passed" line and exit 0; on failure a "<name>-failure.png" screenshot and exit 1).

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing environment variable ${name}`);
  return v;
};

export function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

// Runs `steps({ page, context, log, shot, base })` in a fresh browser and reports as above.
export async function runBrowserTest(name, steps) {
  const artifacts = env("TURNSTONE_ARTIFACTS");
  mkdirSync(artifacts, { recursive: true });
  const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
    executablePath: env("TURNSTONE_CHROMIUM"),
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    viewport: { width: 1280, height: 800 },
    colorScheme: "light",
  });
  context.setDefaultTimeout(20000);
  const page = context.pages()[0] || (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  const shot = (file) => page.screenshot({ path: join(artifacts, file + ".png"), animations: "disabled" });
  const log = (...a) => console.log(`[${name}]`, ...a);
  try {
    await steps({ page, context, log, shot, base: env("TURNSTONE_URL") });
    assert(pageErrors.length === 0, "no page errors: " + pageErrors.join("; "));
    console.log(`${name} test: all steps passed`);
    await context.close();
    process.exit(0);
  } catch (err) {
    console.error(err);
    try {
      await shot(name + "-failure");
    } catch (e) {
      // The screenshot is best effort.
    }
    await context.close();
    process.exit(1);
  }
}
