// Drives the node's web UI in headless Debian Chromium. Run by
// node/tests/suite/server/browser.rs, which starts an in-process node (slow fake model) and
// passes: TURNSTONE_URL, TURNSTONE_TOKEN, TURNSTONE_CHROMIUM, TURNSTONE_ARTIFACTS,
// TURNSTONE_PROFILE (a fresh user-data dir). Prints "browser test: all steps passed" and
// exits 0 on success; on failure saves failure.png and exits 1.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing environment variable ${name}`);
  return v;
};
const BASE = env("TURNSTONE_URL");
const TOKEN = env("TURNSTONE_TOKEN");
const ARTIFACTS = env("TURNSTONE_ARTIFACTS");
mkdirSync(ARTIFACTS, { recursive: true });

const TIMEOUT = 20000;
const log = (...a) => console.log("[browser]", ...a);

function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
  executablePath: env("TURNSTONE_CHROMIUM"),
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1280, height: 820 },
  deviceScaleFactor: 1,
  colorScheme: "light",
});
context.setDefaultTimeout(TIMEOUT);
const page = context.pages()[0] || (await context.newPage());

const pageErrors = [];
const consoleProblems = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => {
  const text = m.text();
  if (m.type() === "error" && /Content Security Policy|Uncaught|TypeError|ReferenceError/.test(text)) {
    consoleProblems.push(text);
  }
});
const eventUrls = [];
page.on("request", (r) => {
  if (r.url().includes("/v1/api/events?")) eventUrls.push(r.url());
});

const shot = (name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), animations: "disabled" });

async function step(name, fn) {
  log("step:", name);
  await fn();
}

const paneSel = () => page.evaluate(() => {
  const p = document.querySelector(".pane:not([hidden])");
  return p ? p.dataset.wsId : null;
});

// Text of the assistant messages of the visible pane.
const assistantTexts = () => page.evaluate(() =>
  [...document.querySelectorAll(".pane:not([hidden]) .msg.assistant .md")].map((e) => e.textContent));

async function sendMessage(text) {
  await page.locator("#input").fill(text);
  await page.locator("#input").press("Enter");
}

try {
  await step("the page asks for a token", async () => {
    await page.goto(BASE + "/");
    await page.locator("#login-overlay").waitFor({ state: "visible" });
    await shot("login");
  });

  await step("a wrong token is refused", async () => {
    await page.locator("#login-token").fill("not-the-token");
    await page.locator("#login-submit").click();
    await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
    assert(await page.locator("#login-overlay").isVisible(), "still signed out");
  });

  await step("signing in shows the dashboard", async () => {
    await page.locator("#login-token").fill(TOKEN);
    await page.locator("#login-submit").click();
    await page.locator("#login-overlay").waitFor({ state: "hidden" });
    await page.locator(".ws-item").first().waitFor();
    await page.locator("#global-conn[data-state=open]").waitFor();
    assert((await page.locator(".ws-item").count()) === 1, "one workstream at start");
  });

  let defaultWs = await paneSel();
  let wsId;
  await step("a new workstream opens in a tab and in the URL", async () => {
    await page.waitForFunction(() => new URL(location.href).searchParams.get("ws_id"));
    defaultWs = new URL(page.url()).searchParams.get("ws_id");
    await page.locator("#new-ws").click();
    await page.waitForFunction((d) => {
      const id = new URL(location.href).searchParams.get("ws_id");
      return id && id !== d;
    }, defaultWs);
    wsId = new URL(page.url()).searchParams.get("ws_id");
    assert((await page.locator(".ws-item").count()) === 2, "two workstreams listed");
    assert((await page.locator(".tab").count()) === 2, "two tabs");
    assert((await page.locator(".tab.active").getAttribute("data-ws-id")) === wsId, "new tab active");
    assert((await paneSel()) === wsId, "its pane is shown");
  });

  await step("a message streams back as rendered markdown", async () => {
    await sendMessage("Hello **browser** — `inline code` and a [link](https://example.invalid/x)");
    await page.locator(".pane:not([hidden]) .msg.user .bubble").first().waitFor();
    await page.locator(".pane:not([hidden]) .msg.assistant.streaming").waitFor();
    await page.locator(".pane:not([hidden]) .msg.assistant[data-final]").waitFor();
    const texts = await assistantTexts();
    assert(texts.length === 1, "one reply: " + JSON.stringify(texts));
    assert(texts[0] === "Hello browser — inline code and a link", "rendered text: " + JSON.stringify(texts[0]));
    const md = page.locator(".pane:not([hidden]) .msg.assistant .md");
    assert((await md.locator("strong").textContent()) === "browser", "bold");
    assert((await md.locator("code").textContent()) === "inline code", "code");
    assert((await md.locator("a").getAttribute("rel")).includes("noopener"), "safe link");
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
  });

  await step("a tool call is approved in the approval block", async () => {
    await sendMessage("TOOL: echo from-browser");
    const approval = page.locator(".pane:not([hidden]) .approval");
    await approval.waitFor();
    await page.locator(".tab.active .state-dot[data-state=attention]").waitFor();
    await page.locator(".pane:not([hidden]) .tool[data-status=pending]").waitFor();
    await shot("approval");
    const risk = approval.locator(".approval-items .risk:not(.llm)[data-risk=low]");
    assert((await risk.textContent()) === "low risk", "the heuristic verdict is shown on the item");
    await approval.locator("button[data-action=approve]").click();
    await page.locator(".pane:not([hidden]) .approval.approved").waitFor();
    assert(await approval.locator("button[data-action=deny]").isDisabled(), "buttons disabled after the decision");
    await page.waitForFunction(() => {
      const out = document.querySelector(".pane:not([hidden]) .tool .tool-output");
      return out && out.textContent.includes("from-browser");
    });
    await page.locator(".pane:not([hidden]) .tool[data-status=done]").waitFor();
    await page.waitForFunction(() =>
      [...document.querySelectorAll(".pane:not([hidden]) .msg.assistant[data-final] .md")]
        .some((e) => e.textContent.startsWith("done: from-browser")));
  });

  const words = Array.from({ length: 40 }, (_, i) => "word" + String(i + 1).padStart(2, "0"));
  const slow = "Resume check: " + words.join(" ");
  await step("a dropped stream reconnects with backoff and resumes without duplicates", async () => {
    const before = (await assistantTexts()).length;
    await sendMessage(slow);
    // Wait until the reply is partly shown, then cut the network.
    await page.waitForFunction((n) => {
      const all = document.querySelectorAll(".pane:not([hidden]) .msg.assistant .md");
      return all.length > n && all[all.length - 1].textContent.length > 30;
    }, before);
    await context.setOffline(true);
    await page.evaluate(() => window.turnstone.dropStreams());
    const partial = (await assistantTexts()).at(-1);
    assert(partial.length < slow.length, "cut while streaming (" + partial.length + " chars shown)");
    await page.locator("#reconnect-banner").waitFor({ state: "visible" });
    await page.locator("#global-conn[data-state=reconnecting]").waitFor();
    // Backoff: the first retry failed while offline, the next waits longer.
    await page.waitForFunction((id) => {
      const s = window.turnstone.streamStates()[id];
      return s && s.delay >= 4000;
    }, wsId);
    await shot("reconnecting");
    await context.setOffline(false);
    await page.locator("#reconnect-banner").waitFor({ state: "hidden" });
    await page.waitForFunction((n) =>
      document.querySelectorAll(".pane:not([hidden]) .msg.assistant[data-final]").length > n, before);
    const texts = await assistantTexts();
    assert(texts.length === before + 1, "one new reply: " + JSON.stringify(texts.slice(before)));
    assert(texts.at(-1) === slow, "exact text after resume: " + JSON.stringify(texts.at(-1)));
    const paneText = await page.locator(".pane:not([hidden])").textContent();
    assert(paneText.split("word40").length - 1 === 2, "the last word appears once in the message and once in the reply");
    assert(eventUrls.some((u) => u.includes("ws_id=" + wsId) && /last_event_id=\d+/.test(u)),
      "resumed with last_event_id: " + JSON.stringify(eventUrls));
    await page.locator("#global-conn[data-state=open]").waitFor();
  });

  await step("cancel stops a streaming reply", async () => {
    const before = (await assistantTexts()).length;
    const long = "Cancel me: " + words.join(" ") + " " + words.join(" ");
    await sendMessage(long);
    await page.waitForFunction((n) =>
      document.querySelectorAll(".pane:not([hidden]) .msg.assistant").length > n, before);
    await page.locator("#cancel-btn:not([disabled])").click();
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
    await page.locator(".pane:not([hidden]) .line.info", { hasText: "cancelled" }).waitFor();
    const texts = await assistantTexts();
    assert(texts.at(-1).length < long.length, "the reply stopped early");
    assert(await page.locator("#cancel-btn").isDisabled(), "nothing left to cancel");
  });

  await step("back and forward switch workstreams", async () => {
    await page.goBack();
    await page.waitForFunction((d) => new URL(location.href).searchParams.get("ws_id") === d, defaultWs);
    await page.waitForFunction((d) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === d, defaultWs);
    assert((await page.locator("#ws-name").textContent()) === "default", "default shown");
    await page.goForward();
    await page.waitForFunction((d) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === d, wsId);
  });

  await step("a reload rebuilds the conversation from history", async () => {
    await page.reload();
    await page.waitForFunction((d) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === d, wsId);
    await page.waitForFunction(() => document.querySelectorAll(".pane:not([hidden]) .msg.user").length === 4);
    const texts = await assistantTexts();
    assert(texts.includes(slow), "history has the resumed reply: " + JSON.stringify(texts));
    assert(texts.at(-1).startsWith("Canc"), "and the cancelled one last: " + JSON.stringify(texts));
    assert(texts.filter((t) => t === slow).length === 1, "not duplicated");
    await page.locator(".pane:not([hidden]) .tool[data-status=done]").waitFor();
  });

  await step("markdown, reasoning and code render while streaming", async () => {
    const before = (await assistantTexts()).length;
    const users = await page.locator(".pane:not([hidden]) .msg.user").count();
    // Shift+Enter is a new line, not a send.
    await page.locator("#input").fill("first line");
    await page.locator("#input").press("Shift+Enter");
    await page.locator("#input").pressSequentially("second line");
    assert((await page.locator("#input").inputValue()) === "first line\nsecond line", "multi-line input");
    assert((await page.locator(".pane:not([hidden]) .msg.user").count()) === users, "nothing sent");
    await sendMessage([
      "THINK: The user wants a tour of the renderer.",
      "## Release notes",
      "",
      "Turnstone now renders **markdown** with _emphasis_, `inline code` and lists:",
      "",
      "- streamed text",
      "- tool output",
      "",
      "```rust",
      "fn main() { println!(\"<hi>\"); }",
      "```",
    ].join("\n"));
    await page.waitForFunction((n) =>
      document.querySelectorAll(".pane:not([hidden]) .msg.assistant[data-final]").length > n, before);
    const last = page.locator(".pane:not([hidden]) .msg.assistant .md").last();
    assert((await last.locator("h2").textContent()) === "Release notes", "heading");
    assert((await last.locator("li").count()) === 2, "list items");
    assert((await last.locator("em").textContent()) === "emphasis", "italic");
    assert((await last.locator("pre.code code").textContent()) === 'fn main() { println!("<hi>"); }', "code block, escaped");
    assert((await last.locator("script").count()) === 0, "no markup injected");
    const reasoning = page.locator(".pane:not([hidden]) details.reasoning").last();
    assert((await reasoning.textContent()).includes("tour of the renderer"), "reasoning shown");
    assert(!(await reasoning.evaluate((d) => d.open)), "reasoning collapsed once the answer started");
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
  });

  await step("a plan is reviewed in its block, replayed on reload, and Accept resolves it", async () => {
    await sendMessage('CALL:plan_agent {"goal": "Plan the **browser** release"}');
    // The plan_agent call itself needs approval first.
    const approval = page.locator(".pane:not([hidden]) .approval:not(.plan)").last();
    await approval.waitFor();
    await approval.locator("button[data-action=approve]").click();
    const plan = page.locator(".pane:not([hidden]) .approval.plan");
    await plan.waitFor();
    await page.locator(".tab.active .state-dot[data-state=attention]").waitFor();
    assert((await plan.locator(".md strong").textContent()) === "browser", "the plan is rendered markdown");
    await shot("plan-review");
    // A fresh attach replays the pending review once.
    await page.reload();
    await page.waitForFunction((d) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === d, wsId);
    await plan.waitFor();
    assert((await plan.count()) === 1, "replayed once");
    // Refine needs feedback text.
    await plan.locator("button[data-action=refine]").click();
    assert((await plan.count()) === 1, "nothing sent without feedback");
    await plan.locator("button[data-action=accept]").click();
    await page.locator(".pane:not([hidden]) .line.plan-outcome[data-decision=accept]").waitFor();
    await plan.waitFor({ state: "detached" });
    await page.waitForFunction(() =>
      [...document.querySelectorAll(".pane:not([hidden]) .tool .tool-output")].some((e) => e.textContent.includes("[Plan saved to ")));
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
  });

  await step("a denied call shows its effect receipt, live and after a reload", async () => {
    await sendMessage("TOOL: echo never-run");
    const approval = page.locator(".pane:not([hidden]) .approval:not(.plan)").last();
    await approval.waitFor();
    await approval.locator("button[data-action=deny]").click();
    // turn_complete.receipts puts the badge on the call's block.
    const badge = page.locator(".pane:not([hidden]) .tool[data-effect=none] .badge.effect").last();
    await badge.waitFor();
    assert((await badge.textContent()) === "effect: none", "badge text: " + (await badge.textContent()));
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
    await shot("receipt");
    // The history entry's `receipt` rebuilds it.
    await page.reload();
    await page.waitForFunction((d) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === d, wsId);
    await page.locator(".pane:not([hidden]) .tool[data-effect=none] .badge.effect").last().waitFor();
    assert((await page.locator(".pane:not([hidden]) .tool[data-effect]").count()) === 1, "one receipted call");
  });

  await step("the posture selector lets auto-review run a low-risk call unasked", async () => {
    const select = page.locator("#posture-select");
    assert((await select.inputValue()) === "ask", "a new workstream asks");
    const asked = await page.locator(".pane:not([hidden]) .approval").count();
    const posted = page.waitForResponse((r) => r.url().endsWith("/posture") && r.status() === 200);
    await select.selectOption("auto-review");
    await posted;
    await sendMessage("TOOL: echo unasked");
    await page.waitForFunction(() =>
      [...document.querySelectorAll(".pane:not([hidden]) .msg.assistant[data-final] .md")]
        .some((e) => e.textContent.startsWith("done: unasked")));
    assert((await page.locator(".pane:not([hidden]) .approval").count()) === asked, "no approval was asked");
    const back = page.waitForResponse((r) => r.url().endsWith("/posture") && r.status() === 200);
    await select.selectOption("ask");
    await back;
  });

  await step("the judge's verdict and the output guard's warning are shown", async () => {
    const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const secret = "ghp_" + Array.from({ length: 36 }, (_, i) => alnum[(i * 7 + 3) % alnum.length]).join("");
    const before = await page.locator(".pane:not([hidden]) .approval:not(.plan)").count();
    await sendMessage("TOOL: echo token=" + secret);
    await page.waitForFunction((n) => document.querySelectorAll(".pane:not([hidden]) .approval:not(.plan)").length > n, before);
    const approval = page.locator(".pane:not([hidden]) .approval:not(.plan)").last();
    const llm = approval.locator(".approval-items .risk.llm");
    await llm.waitFor();
    assert((await llm.textContent()) === "judge: low risk, approve 95%", "LLM verdict: " + (await llm.textContent()));
    await approval.locator(".judging").waitFor({ state: "hidden" });
    await shot("judge");
    await approval.locator("button[data-action=approve]").click();
    const warning = page.locator(".pane:not([hidden]) .tool .guard-warning").last();
    await warning.waitFor();
    const text = await warning.textContent();
    assert(text.startsWith("⚠ output guard:") && text.includes("secrets redacted"), "warning: " + text);
    await page.waitForFunction(() => {
      const outs = [...document.querySelectorAll(".pane:not([hidden]) .tool .tool-output")];
      return outs.length && outs[outs.length - 1].textContent.includes("[REDACTED");
    });
    const outputs = await page.locator(".pane:not([hidden]) .tool .tool-output").allTextContents();
    assert(!outputs.some((o) => o.includes(secret.slice(4))), "the secret is not shown");
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
    await shot("guard");
  });

  await step("two sub-agents waiting at once get a block each, each deciding its own round", async () => {
    const open = ".pane:not([hidden]) .approval:not(.plan):not(.approved):not(.denied)";
    await sendMessage('CALL:task_agent {"prompt": "TOOL: echo sub-one"}\nCALL:task_agent {"prompt": "TOOL: echo sub-two"}');
    // The parent's own round (its two task_agent calls) first.
    await page.waitForFunction((sel) => document.querySelectorAll(sel).length === 1, open);
    await page.locator(open).first().locator("button[data-action=approve]").click();
    // Then each sub-agent asks through this workstream: two blocks pending together.
    await page.waitForFunction((sel) => document.querySelectorAll(sel).length === 2, open);
    await page.locator(".tab.active .state-dot[data-state=attention]").waitFor();
    const one = page.locator(open).filter({ hasText: "echo sub-one" });
    const two = page.locator(open).filter({ hasText: "echo sub-two" });
    const oneId = await one.getAttribute("data-cycle-id");
    const twoId = await two.getAttribute("data-cycle-id");
    assert(oneId && twoId && oneId !== twoId, "each block is its own round: " + oneId + " " + twoId);
    assert((await one.locator(".approval-title").textContent()).includes("(sub-agent agent-"), "the block names its sub-agent");
    await shot("two-rounds");
    const block = (id) => page.locator(`.pane:not([hidden]) .approval[data-cycle-id="${id}"]`);
    await two.locator("button[data-action=deny]").click();
    await page.locator(`.pane:not([hidden]) .approval.denied[data-cycle-id="${twoId}"]`).waitFor();
    const oneClass = await block(oneId).getAttribute("class");
    assert(!/approved|denied/.test(oneClass), "denying one round leaves the other pending: " + oneClass);
    await block(oneId).locator("button[data-action=approve]").click();
    await page.locator(`.pane:not([hidden]) .approval.approved[data-cycle-id="${oneId}"]`).waitFor();
    await page.locator("#ws-state-label[data-state=idle]").waitFor();
    // The sub-agents' results: one ran its command, the other was denied.
    await page.waitForFunction(() => {
      const outs = [...document.querySelectorAll(".pane:not([hidden]) .tool .tool-output")].map((e) => e.textContent);
      return outs.some((o) => o.includes("done: sub-one")) && outs.some((o) => o.includes("Denied by user"));
    });
  });

  await step("screenshots in light and dark", async () => {
    await page.locator("#input").fill("");
    await page.locator("#input").blur();
    await shot("final");
    await page.locator("#theme-toggle").click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
    await shot("final-dark");
    await page.locator("#theme-toggle").click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === "light");
    await page.setViewportSize({ width: 420, height: 820 });
    await shot("narrow");
    await page.setViewportSize({ width: 1280, height: 820 });
  });

  await step("without a login endpoint the token is sent by the page itself", async () => {
    await context.clearCookies();
    const p2 = await context.newPage();
    p2.on("pageerror", (e) => pageErrors.push(String(e)));
    let loginCalls = 0;
    await p2.route("**/v1/api/auth/login", (r) => {
      loginCalls++;
      return r.fulfill({ status: 404, contentType: "text/plain", body: "Not Found" });
    });
    await p2.goto(BASE + "/?ws_id=" + wsId);
    await p2.locator("#login-overlay").waitFor({ state: "visible" });
    await p2.locator("#login-token").fill(TOKEN);
    await p2.locator("#login-submit").click();
    await p2.locator("#login-overlay").waitFor({ state: "hidden" });
    assert(loginCalls === 1, "tried the login endpoint first");
    await p2.locator("#global-conn[data-state=open]").waitFor();
    // The event stream authenticated too: the pane was rebuilt from history.
    await p2.waitForFunction(() => document.querySelectorAll(".pane:not([hidden]) .msg.user").length === 10); // six, plus the receipt, posture, judge/guard and sub-agent rounds steps'
    await p2.locator("#logout").click();
    await p2.locator("#login-overlay").waitFor({ state: "visible" });
    await p2.close();
  });

  assert(pageErrors.length === 0, "no uncaught page errors: " + JSON.stringify(pageErrors));
  assert(consoleProblems.length === 0, "no script or CSP errors: " + JSON.stringify(consoleProblems));
  log("browser test: all steps passed");
  await context.close();
  process.exit(0);
} catch (e) {
  console.error("[browser] FAILED:", e && e.stack ? e.stack : e);
  console.error("[browser] page errors:", JSON.stringify(pageErrors));
  console.error("[browser] event streams opened:", JSON.stringify(eventUrls));
  try {
    await shot("failure");
    console.error("[browser] stream states:", JSON.stringify(await page.evaluate(() => window.turnstone && window.turnstone.streamStates())));
  } catch (err) {
    // the page may be gone
  }
  await context.close().catch(() => {});
  process.exit(1);
}
