// The three browser engines behind one small page interface, so one test body runs in each (as
// candle and burn run one test per backend):
//   chromium  Debian's Chromium through playwright-core (CDP)
//   firefox   Debian's firefox-esr through puppeteer-core over WebDriver BiDi (no geckodriver)
//   webkit    WebKitGTK's MiniBrowser through WebKitWebDriver (Debian's webkit2gtk-driver) and
//             selenium-webdriver; it needs a display, so a private Xvfb is started when there is none
//
// `launchEngine(name)` → { name, version, newPage(), close() }; a page has
//   goto(url)               navigate, wait for the load event, read the demo page's record (observe.mjs)
//   evaluate(fn, arg)       run `fn(arg)` (may be async) in the page; its JSON-able value
//   waitFor(fn, arg, ms)    poll `fn(arg)` in the page until truthy (its value); throws after `ms`
//   click(selector)         a real pointer click on the first match in the top document
//   press(key)              a real key press: 'Tab', 'Shift+Tab', 'Enter', 'Space', 'Escape', …
//   fill(selector, value), check(selector, on)   set a form field (with input and change events)
//   setViewport(width, height), screenshot(file), close()
//   logs                    the console, where the driver reports it (Chromium, Firefox)
//   requests                every URL the page and its workers requested, or null where the driver
//                           cannot see them (WebKit): the servers' own logs cover every engine
//
// GPT2_ENGINES=chromium,firefox (a comma list) narrows the engines the tests run in.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium as playwrightChromium } from 'playwright-core';
import { CHROMIUM_ARGS, chromiumPath, freePort } from './harness.mjs';
import { observePage } from './observe.mjs';

export const ALL_ENGINES = ['chromium', 'firefox', 'webkit'];
export const ENGINES = (process.env.GPT2_ENGINES || ALL_ENGINES.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
for (const e of ENGINES) {
  if (!ALL_ENGINES.includes(e)) throw new Error(`GPT2_ENGINES: unknown engine "${e}"; choose from ${ALL_ENGINES.join(', ')}`);
}

const VIEWPORT = { width: 1100, height: 900 };

/** `name` on PATH, or null. */
function which(name) {
  for (const dir of (process.env.PATH || '').split(':')) {
    const p = path.join(dir, name);
    if (fs.existsSync(p)) return p;
  }
  return null;
}

export function firefoxPath() {
  const p = process.env.FIREFOX || which('firefox-esr') || which('firefox');
  if (!p) throw new Error('Firefox not found: install the Debian package firefox-esr, or set FIREFOX');
  return p;
}

export function miniBrowserPath() {
  if (process.env.WEBKIT_MINIBROWSER) return process.env.WEBKIT_MINIBROWSER;
  for (const pkg of ['libwebkit2gtk-4.1-0', 'libwebkitgtk-6.0-4']) {
    try {
      const hit = execFileSync('dpkg', ['-L', pkg], { encoding: 'utf8' }).split('\n').find((l) => l.endsWith('/MiniBrowser'));
      if (hit) return hit;
    } catch {
      // not installed
    }
  }
  throw new Error('WebKitGTK\'s MiniBrowser not found: install the Debian package webkit2gtk-driver, or set WEBKIT_MINIBROWSER');
}

/** The function's source as an expression that calls it with the JSON argument. */
const callSource = (fn) => `(${fn.toString()})`;

/** What every page implementation shares: waitFor by polling, fill/check through the DOM. */
class BasePage {
  constructor() {
    this.logs = [];
    this.requests = null;
  }

  /** Whether an error of `evaluate` says the driver could not read a poll's answer back (SeleniumPage's). */
  unreadable() {
    return false;
  }

  /** Navigates (each engine's own way, waiting for the load event), then reads the demo page's record. */
  async goto(url) {
    await this.navigate(url);
    await this.evaluate(observePage).catch(() => {}); // a page that navigated away again: nothing to read
  }

  async waitFor(fn, arg = null, timeout = 60_000, poll = 25) {
    const end = Date.now() + timeout;
    for (;;) {
      let v = null;
      try {
        v = await this.evaluate(fn, arg);
      } catch (e) {
        // A poll the driver itself failed to read back (`unreadable`): polled again until the end.
        if (!this.unreadable(e) || Date.now() > end) throw e;
      }
      if (v) return v;
      if (Date.now() > end) throw new Error(`waitFor timed out after ${timeout} ms: ${fn.toString().slice(0, 160)}`);
      await sleep(poll);
    }
  }

  fill(selector, value) {
    return this.evaluate(({ selector, value }) => {
      const el = document.querySelector(selector);
      if (!el) throw new Error(`fill: no element matches ${selector}`);
      el.focus();
      el.value = value;
      el.dispatchEvent(new Event('input', { bubbles: true }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }, { selector, value: String(value) });
  }

  check(selector, on = true) {
    return this.evaluate(({ selector, on }) => {
      const el = document.querySelector(selector);
      if (!el) throw new Error(`check: no element matches ${selector}`);
      if (el.checked !== on) el.click();
    }, { selector, on });
  }

  text(selector) {
    return this.evaluate((s) => document.querySelector(s)?.textContent ?? null, selector);
  }
}

// --- Chromium: playwright-core ----------------------------------------------------------------

class PlaywrightPage extends BasePage {
  constructor(context, page) {
    super();
    this.context = context;
    this.page = page;
    this.requests = [];
    context.on('request', (r) => this.requests.push(r.url()));
    page.on('console', (m) => this.logs.push(`console.${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => this.logs.push(`pageerror: ${e.message}`));
    page.on('worker', (w) => w.on('console', (m) => this.logs.push(`worker console.${m.type()}: ${m.text()}`)));
  }

  navigate(url) { return this.page.goto(url); }
  evaluate(fn, arg = null) { return this.page.evaluate(fn, arg); }
  click(selector) { return this.page.click(selector, { timeout: 10_000 }); }
  press(key) { return this.page.keyboard.press(key === 'Space' ? ' ' : key); }
  setViewport(width, height) { return this.page.setViewportSize({ width, height }); }
  screenshot(file) { return this.page.screenshot({ path: file, fullPage: true }); }
  close() { return this.context.close(); }
}

async function launchChromium(args = []) {
  const browser = await playwrightChromium.launch({ executablePath: chromiumPath(), args: [...CHROMIUM_ARGS, ...args] });
  return {
    name: 'chromium',
    version: `Chromium ${browser.version()}`,
    async newPage({ viewport = VIEWPORT, touch = false, userAgent } = {}) {
      const context = await browser.newContext({ viewport, hasTouch: touch, isMobile: touch, ...(userAgent ? { userAgent } : {}) });
      return new PlaywrightPage(context, await context.newPage());
    },
    close: () => browser.close(),
  };
}

/**
 * Chromium with a profile on disk, as a person's browser has (a new context is in memory, where
 * the HTTP cache keeps no file of tens of MB): one page, for the cold-start benchmark's first and
 * return visits. The profile is removed on close.
 */
async function launchChromiumProfile(args = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-chromium-'));
  const context = await playwrightChromium.launchPersistentContext(dir, {
    executablePath: chromiumPath(), args: [...CHROMIUM_ARGS, ...args], viewport: VIEWPORT,
  });
  let pages = 0;
  return {
    name: 'chromium',
    version: `Chromium ${context.browser()?.version() ?? ''}`.trim(),
    async newPage() {
      if (pages++) throw new Error('a Chromium profile page: one per launch');
      const page = new PlaywrightPage(context, context.pages()[0] ?? await context.newPage());
      page.close = () => Promise.resolve(); // the context closes with the engine
      return page;
    },
    async close() {
      await context.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// --- Firefox: puppeteer-core over WebDriver BiDi ----------------------------------------------

class PuppeteerPage extends BasePage {
  constructor(context, page) {
    super();
    this.context = context;
    this.page = page;
    this.requests = [];
    page.on('request', (r) => this.requests.push(r.url()));
    page.on('console', (m) => this.logs.push(`console.${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => this.logs.push(`pageerror: ${e.message}`));
  }

  navigate(url) { return this.page.goto(url, { waitUntil: 'load', timeout: 60_000 }); }
  evaluate(fn, arg = null) { return this.page.evaluate(fn, arg); }
  click(selector) { return this.page.click(selector); }
  async press(key) {
    const [mod, k] = key.includes('+') ? key.split('+') : [null, key];
    const name = k === 'Space' ? ' ' : k;
    if (mod) await this.page.keyboard.down(mod);
    await this.page.keyboard.press(name);
    if (mod) await this.page.keyboard.up(mod);
  }
  setViewport(width, height) { return this.page.setViewport({ width, height }); }
  screenshot(file) { return this.page.screenshot({ path: file, fullPage: true }); }
  close() { return this.context.close(); }
}

async function launchFirefox() {
  const { default: puppeteer } = await import('puppeteer-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gpt2-firefox-'));
  const browser = await puppeteer.launch({
    browser: 'firefox', executablePath: firefoxPath(), protocol: 'webDriverBiDi', headless: true, userDataDir: profile,
    extraPrefsFirefox: {
      // No network side channels (as Chromium's --disable-background-networking).
      'app.update.enabled': false, 'browser.safebrowsing.malware.enabled': false,
      'browser.safebrowsing.phishing.enabled': false, 'network.captive-portal-service.enabled': false,
      'network.connectivity-service.enabled': false, 'extensions.update.enabled': false,
      'browser.aboutConfig.showWarning': false, 'datareporting.policy.dataSubmissionEnabled': false,
      // The tests' pages run a generation in the background of a test: never throttle them.
      'dom.min_background_timeout_value': 4, 'dom.timeout.enable_budget_timer_throttling': false,
    },
  });
  return {
    name: 'firefox',
    version: `Firefox ${(await browser.version()).replace(/^firefox\//, '')}`,
    async newPage({ viewport = VIEWPORT } = {}) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport(viewport);
      return new PuppeteerPage(context, page);
    },
    async close() {
      await browser.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

// --- WebKit: WebKitWebDriver + selenium-webdriver ---------------------------------------------

/** An X display for WebKitGTK: $DISPLAY, or a private Xvfb (stopped by the returned function). */
async function display() {
  if (process.env.DISPLAY) return { env: process.env.DISPLAY, stop: () => {} };
  const xvfb = which('Xvfb');
  if (!xvfb) throw new Error('WebKitGTK needs a display: install the Debian package xvfb (or set DISPLAY)');
  const proc = spawn(xvfb, ['-displayfd', '1', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const n = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('Xvfb did not start within 10 s')), 10_000);
    proc.stdout.on('data', (d) => { clearTimeout(timer); resolve(String(d).trim()); });
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`Xvfb exited with status ${code}`)); });
  });
  return { env: `:${n}`, stop: () => proc.kill() };
}

class SeleniumPage extends BasePage {
  /**
   * WebKitGTK's driver now and then cannot parse a script's result while a page is busy loading
   * ("Could not parse script result", seen polling the file:// bundle as it loaded): the page's
   * state was not read, not wrong.
   */
  unreadable(e) {
    return e?.name === 'WebDriverError' && /Could not parse script result/.test(e.message);
  }

  constructor(driver, onClose) {
    super();
    this.driver = driver;
    this.onClose = onClose;
  }

  /**
   * Navigates and waits for the load event by polling document.readyState: WebKitWebDriver's own
   * wait ("normal" page-load strategy) sometimes never returns for the offline bundle, whose worker
   * is still starting, though the page's readyState is "complete" within seconds.
   */
  async navigate(url) {
    // A mark on the document being left, so that its own "complete" is not taken for the new one's.
    await this.driver.executeScript('window.__gpt2Leaving = true').catch(() => {});
    await this.driver.get(url);
    const end = Date.now() + 120_000;
    for (;;) {
      let state = null;
      try {
        state = await this.driver.executeScript('return !window.__gpt2Leaving && document.readyState');
      } catch {
        // the new document is not there yet
      }
      if (state === 'complete') return;
      if (Date.now() > end) throw new Error(`${url} did not finish loading within 120 s`);
      await sleep(50);
    }
  }

  async evaluate(fn, arg = null) {
    const out = await this.driver.executeAsyncScript(
      `const done = arguments[arguments.length - 1];
       Promise.resolve().then(() => ${callSource(fn)}(arguments[0])).then(
         (v) => done({ ok: v === undefined ? null : JSON.parse(JSON.stringify(v)) }),
         (e) => done({ err: e instanceof Error ? e.message : String(e) }));`, arg);
    if (out && 'err' in out) throw new Error(out.err);
    return out?.ok ?? null;
  }

  async click(selector) {
    const { By } = await import('selenium-webdriver');
    await (await this.driver.findElement(By.css(selector))).click();
  }

  async press(key) {
    const { Key } = await import('selenium-webdriver');
    const [mod, k] = key.includes('+') ? key.split('+') : [null, key];
    const names = { Tab: Key.TAB, Enter: Key.ENTER, Space: Key.SPACE, Escape: Key.ESCAPE, Shift: Key.SHIFT,
      ArrowDown: Key.ARROW_DOWN, ArrowUp: Key.ARROW_UP, ArrowLeft: Key.ARROW_LEFT, ArrowRight: Key.ARROW_RIGHT, Control: Key.CONTROL };
    let actions = this.driver.actions();
    if (mod) actions = actions.keyDown(names[mod]);
    actions = actions.sendKeys(names[k] ?? k);
    if (mod) actions = actions.keyUp(names[mod]);
    await actions.perform();
  }

  async setViewport(width, height) {
    // The window's outer size; WebKitGTK's chrome takes a little of it (and a window is at least
    // about 450 px wide): tests of narrow layouts use an iframe of that width instead.
    await this.driver.manage().window().setRect({ width, height });
  }

  async screenshot(file) {
    fs.writeFileSync(file, Buffer.from(await this.driver.takeScreenshot(), 'base64'));
  }

  async close() {
    await this.onClose();
  }
}

/** WebKitWebDriver on a free port (it drives one session at a time): `{ server, stop() }`. */
async function startWebKitDriver(display) {
  const port = await freePort();
  const driverBin = process.env.WEBKIT_WEBDRIVER || which('WebKitWebDriver');
  if (!driverBin) throw new Error('WebKitWebDriver not found: install the Debian package webkit2gtk-driver');
  const proc = spawn(driverBin, [`--port=${port}`, '--host=127.0.0.1'], { env: { ...process.env, DISPLAY: display }, stdio: 'ignore' });
  const server = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${server}/status`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 100) {
      proc.kill();
      throw new Error('WebKitWebDriver did not start within 10 s');
    }
    await sleep(100);
  }
  return { server, stop: () => proc.kill() };
}

async function launchWebKit() {
  const { Builder } = await import('selenium-webdriver');
  const x = await display();
  const binary = miniBrowserPath();
  // WebDriver has one window per session, and WebKitWebDriver one session at a time: each page is
  // a session (a fresh profile) of a driver of its own, so pages can be open side by side.
  const open = new Set();
  const newSession = async () => {
    const wd = await startWebKitDriver(x.env);
    let driver;
    try {
      driver = await new Builder().usingServer(wd.server).withCapabilities({
        browserName: 'MiniBrowser',
        pageLoadStrategy: 'none', // SeleniumPage.goto waits for the load event itself
        'webkitgtk:browserOptions': { binary, args: ['--automation'] },
      }).build();
      await driver.manage().setTimeouts({ script: 300_000, pageLoad: 120_000 });
    } catch (e) {
      wd.stop();
      throw e;
    }
    const session = {
      driver,
      quit: async () => {
        open.delete(session);
        await driver.quit().catch(() => {});
        wd.stop();
      },
    };
    open.add(session);
    return session;
  };
  const first = await newSession();
  const version = (await first.driver.getCapabilities()).get('browserVersion');
  await first.quit();
  return {
    name: 'webkit',
    version: `WebKitGTK ${version}`,
    async newPage({ viewport = VIEWPORT } = {}) {
      const session = await newSession();
      const page = new SeleniumPage(session.driver, session.quit);
      await page.setViewport(viewport.width, viewport.height + 80);
      return page;
    },
    async close() {
      for (const session of [...open]) await session.quit();
      x.stop();
    },
  };
}

/**
 * One engine, launched: `chromium` takes extra command-line flags (e.g. SwiftShader WebGPU), and
 * `profile: true` gives it a profile on disk (launchChromiumProfile).
 */
export function launchEngine(name, { chromiumArgs = [], profile = false } = {}) {
  if (name === 'chromium') return profile ? launchChromiumProfile(chromiumArgs) : launchChromium(chromiumArgs);
  if (name === 'firefox') return launchFirefox();
  if (name === 'webkit') return launchWebKit();
  throw new Error(`unknown engine ${name}`);
}

/**
 * Runs `fn(page)` on a fresh page of `engine` and closes it; the page's console is added to the
 * error when something fails.
 */
export async function withEnginePage(engine, fn, opts = {}) {
  const page = await engine.newPage(opts);
  try {
    return await fn(page);
  } catch (e) {
    if (page.logs.length) e.message += `\n--- ${engine.name} console ---\n${page.logs.slice(-40).join('\n')}`;
    throw e;
  } finally {
    await page.close().catch(() => {});
  }
}
