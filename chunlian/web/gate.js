// 开门见喜: the doors start swinging on the click while the couplet is being written, so the wait
// hides inside the animation. Everything user-typed or server-sent goes into textContent, never HTML.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const root = document.documentElement;
  const gate = $("gate");
  const kiosk = root.dataset.kiosk === "1";
  const idleMs = (parseFloat(root.dataset.idleS) || 60) * 1000;
  const MAX_WORDS = 4;
  const TIMEOUT_MS = 15000;
  const HANG = {
    traditional: "贴法：面对大门，上联贴右，下联贴左，横批从右往左读",
    modern: "贴法：面对大门，上联贴左，下联贴右，横批从左往右读",
  };
  const state = { request: null, shown: null, seed: null, busy: false };
  // writing together: the characters kept ("upper:3"), the one picked on the gate, a seed for each rewrite
  const together = { locks: new Set(), picked: null, seed: 0 };
  const PUNCT = /[，；、,;]/;
  if (kiosk) root.classList.add("kiosk");

  // ------------------------------------------------------------------ reading the form
  const radio = (name) => document.querySelector(`input[name="${name}"]:checked`).value;
  const hanCount = (s) => [...s].filter((c) => /\p{Script=Han}/u.test(c)).length;
  const words = (q) => q.split(/[\s,，、;；]+/).filter(Boolean);

  // wish words are separated (space or 、); one unbroken run of five or more characters is an upper line
  function isLine(q) {
    return !/[\s、]/.test(q) && hanCount(q) >= 5;
  }

  function readInput() {
    const q = $("q").value.trim();
    if (!q) return null;
    const common = { count: 3, tones: radio("tones"), script: radio("script") };
    if (isLine(q)) return { ...common, upper: q };
    return {
      ...common,
      keywords: words(q),
      length: Number(radio("length")),
      placement: radio("placement"),
    };
  }

  // the wish words now in the field (none while it holds an upper line)
  function chosen() {
    const q = $("q").value.trim();
    return isLine(q) ? [] : words(q);
  }

  function syncChips() {
    const have = chosen();
    document.querySelectorAll(".chip").forEach((b) => b.setAttribute("aria-pressed", String(have.includes(b.textContent))));
  }

  function toggleChip(b) {
    let list = chosen();
    if (list.includes(b.textContent)) list = list.filter((w) => w !== b.textContent);
    else if (list.length < MAX_WORDS) list.push(b.textContent);
    else return flash(`最多${MAX_WORDS}个吉祥词 / at most ${MAX_WORDS} wish words`);
    $("q").value = list.join(" ");
    syncChips();
  }

  // ------------------------------------------------------------------ talking to the server
  // 换一副 sends the couplet shown, so the server steers away from it without writing the first one again
  function ask(req, seed, shown) {
    if (seed == null) return post("/api/v1/couplets", req);
    const avoid = shown ? { upper: shown.upper, lower: shown.lower } : undefined;
    return post("/api/v1/couplets", { ...req, seed, avoid });
  }

  async function post(path, body) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    let r;
    try {
      r = await fetch(path, {
        method: body === undefined ? "GET" : "POST",
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: ctl.signal,
      });
    } catch (e) {
      throw new Error(e.name === "AbortError" ? "等待太久，请再试一次 / took too long, please try again"
                                              : "连不上服务 / cannot reach the server");
    } finally {
      clearTimeout(timer);
    }
    let d = null;
    try { d = await r.json(); } catch (e) { /* not JSON: fall through to the status line */ }
    if (!r.ok) {
      const det = d && d.detail;
      throw new Error(det && det.message ? det.message : `出错了（${r.status}）/ request failed (${r.status})`);
    }
    return d;
  }

  // ------------------------------------------------------------------ showing a couplet
  function fill(el, text, tones) {
    el.replaceChildren();
    [...text].forEach((ch, i) => {
      const s = document.createElement("span");
      s.className = "ch";
      s.textContent = ch;
      const t = tones && tones[i];
      if (t === "平" || t === "仄") s.dataset.tone = t;
      el.append(s);
    });
  }

  const script = () => (state.request && state.request.script) || radio("script");

  // the couplet and its look, as the PNG, the PDFs and the share link take them
  function drawn(c) {
    return new URLSearchParams({
      upper: c.upper, lower: c.lower, horizontal: c.horizontal,
      ink: gate.classList.contains("gold-ink") ? "gold" : "black",
      script: script(),
      layout: gate.dataset.layout,
    });
  }
  const imageUrl = (c) => `/api/v1/couplets/image.png?${drawn(c)}`;
  const pdfUrl = (c, size) => `/api/v1/couplets/print.pdf?${drawn(c)}&size=${size}`;

  function takeHome(c) {
    $("download").href = imageUrl(c);
    $("download").download = `春联-${c.horizontal}.png`;
    $("pdf-a4").href = pdfUrl(c, "a4");
    $("pdf-shop").href = pdfUrl(c, "shop");
    const asked = (takeHome.n = (takeHome.n || 0) + 1);
    post(`/api/v1/share?${drawn(c)}`).then((d) => {
      if (asked !== takeHome.n) return; // a newer couplet is shown already
      $("qr").src = d.qr_svg;
      $("qr").dataset.url = d.url;
      $("qr-hint").hidden = d.reachable;
      $("take").hidden = false;
    }).catch(() => { $("take").hidden = true; });
  }

  // keep: the characters kept stay marked (a rewrite keeps them at their places); otherwise a new couplet
  function show(c, keep = false) {
    state.shown = c;
    if (!keep) together.locks.clear();
    fill($("upper"), c.upper, c.tones && c.tones.upper);
    fill($("lower"), c.lower, c.tones && c.tones.lower);
    fill($("horizontal"), c.horizontal);
    for (const side of ["upper", "lower"]) {
      [...$(side).children].forEach((s, i) => {
        s.tabIndex = 0;
        s.setAttribute("role", "button");
        s.setAttribute("aria-label", `${side === "upper" ? "上联" : "下联"}第${i + 1}字「${s.textContent}」`);
        s.classList.toggle("locked", together.locks.has(`${side}:${i}`));
      });
    }
    gate.style.setProperty("--n", String([...c.upper].length));
    takeHome(c);
    unpick();
    if (!keep) $("notice").textContent = "";
    setStatus("");
    gate.classList.add("written");
    $("actions").hidden = false;
  }

  const same = (a, b) => a && b && a.upper === b.upper && a.lower === b.lower;

  // ------------------------------------------------------------------ actions
  async function openGate(ev) {
    ev.preventDefault();
    if (state.busy) return;
    const req = readInput();
    if (!req) return showError("请先点一个吉祥词，或输入上联 / pick a wish word or type an upper line first");
    showError("");
    state.request = req;
    state.seed = null;
    gate.classList.remove("written");
    setStatus("正在挥毫… / writing…");
    gate.classList.add("open");
    reveal();
    busy(true);
    const t0 = performance.now();
    try {
      show((await ask(req, null)).couplets[0]);
      gate.dataset.elapsedMs = String(Math.round(performance.now() - t0)); // click to couplet on the page
    } catch (e) {
      showError(e.message);
      closeGate();
    } finally {
      busy(false);
    }
  }

  async function another() {
    if (state.busy || !state.request) return;
    busy(true);
    try {
      for (let tries = 0; tries < 4; tries++) {
        state.seed = (state.seed ?? 0) + 1;
        const d = await ask(state.request, state.seed, state.shown);
        const c = d.couplets.find((x) => !same(x, state.shown));
        if (c) {
          gate.classList.remove("written");
          void gate.offsetWidth; // restart the unrolling
          return show(c);
        }
      }
      flash("暂时换不出新的一副 / no different couplet this time");
    } catch (e) {
      flash(e.message);
    } finally {
      busy(false);
    }
  }

  // ------------------------------------------------------------------ writing together
  function unpick() {
    together.picked = null;
    document.querySelectorAll(".ch.picked").forEach((s) => s.classList.remove("picked"));
    $("picked").hidden = true;
  }

  async function pick(side, index) {
    const c = state.shown;
    if (!c) return;
    unpick();
    together.picked = { side, index };
    const span = $(side).children[index];
    span.classList.add("picked");
    const ch = span.textContent;
    $("picked").hidden = false;
    if (matchMedia("(max-width: 760px)").matches) $("picked").scrollIntoView({ block: "nearest" });
    $("picked-what").textContent = `${side === "upper" ? "上联" : "下联"}第${index + 1}字「${ch}」可换成：`;
    $("lock").setAttribute("aria-pressed", String(together.locks.has(`${side}:${index}`)));
    $("alts").replaceChildren();
    try {
      const d = await post("/api/v1/alternatives", {
        upper: c.upper, lower: c.lower, side, index, count: 12, tones: radio("tones"), script: script(),
      });
      if (!together.picked || together.picked.side !== side || together.picked.index !== index || state.shown !== c) return;
      for (const a of d.alternatives) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = a.char;
        b.dataset.tone = a.tone;
        b.setAttribute("aria-label", `换成「${a.char}」（${a.tone}）`);
        b.addEventListener("click", () => choose(side, index, a.char));
        $("alts").append(b);
      }
      if (!d.alternatives.length) $("picked-what").textContent += "没有守住全部规矩的字 / none keeps every rule";
    } catch (e) {
      flash(e.message);
    }
  }

  // a character a person picks is theirs: it is kept (locked), and the rules are read again at once
  async function choose(side, index, ch) {
    const c = { ...state.shown };
    const chars = [...c[side]];
    chars[index] = ch;
    c[side] = chars.join("");
    together.locks.add(`${side}:${index}`);
    await recheck(c);
    pick(side, index);
  }

  async function recheck(c) {
    try {
      const r = await post("/api/v1/check", { upper: c.upper, lower: c.lower, tones: radio("tones") });
      const broken = r.rules.filter((x) => x.hard && !x.passed).map((x) => x.message);
      show({ ...c, tones: r.tones, hard_ok: r.hard_ok }, true);
      $("notice").textContent = broken.length
        ? `不合规矩：${broken.join("；")}。这是您的选择，照录不改 / a rule is broken; kept as you chose`
        : "";
    } catch (e) {
      flash(e.message);
    }
  }

  function toggleLock() {
    const p = together.picked;
    if (!p) return;
    const k = `${p.side}:${p.index}`;
    if (together.locks.has(k)) together.locks.delete(k);
    else together.locks.add(k);
    $(p.side).children[p.index].classList.toggle("locked", together.locks.has(k));
    $("lock").setAttribute("aria-pressed", String(together.locks.has(k)));
  }

  // the line with _ at every place not kept (punctuation stays)
  function pattern(side, keepAll = false) {
    return [...state.shown[side]]
      .map((ch, i) => (PUNCT.test(ch) || keepAll || together.locks.has(`${side}:${i}`) ? ch : "_"))
      .join("");
  }

  async function rewrite(upper, lower) {
    if (state.busy || !state.shown) return;
    const c = state.shown;
    busy(true);
    together.seed += 1;
    try {
      const d = await post("/api/v1/couplets/fill", {
        upper, lower, avoid: { upper: c.upper, lower: c.lower }, seed: together.seed, count: 3,
        tones: radio("tones"), script: script(),
      });
      const n = d.couplets.find((x) => !same(x, c)) || d.couplets[0];
      gate.classList.remove("written");
      void gate.offsetWidth;
      show(n, true);
      $("notice").textContent = d.notice || "";
    } catch (e) {
      flash(e.message);
    } finally {
      busy(false);
    }
  }

  function newLower() {
    if (!state.shown) return;
    const lower = pattern("lower");
    if (!lower.includes("_")) return flash("下联的字都锁定了 / every character of the lower line is kept");
    rewrite(pattern("upper", true), lower);
  }

  function rewriteOpen() {
    if (!state.shown) return;
    if (!together.locks.size) return flash("先点字、锁定要保留的字 / tap and lock the characters to keep first");
    rewrite(pattern("upper"), pattern("lower"));
  }

  async function newHorizontal() {
    const c = state.shown;
    if (!c || state.busy) return;
    together.seed += 1;
    try {
      const d = await post("/api/v1/horizontal", {
        upper: c.upper, lower: c.lower, current: c.horizontal, seed: together.seed, script: script(),
        ...(state.request && state.request.keywords ? { keywords: state.request.keywords } : {}),
      });
      show({ ...c, horizontal: d.horizontal }, true);
    } catch (e) {
      flash(e.message);
    }
  }

  function onChar(ev) {
    const s = ev.target.closest(".ch");
    if (!s || !gate.classList.contains("written") || state.busy) return;
    if (ev.type === "keydown" && ev.key !== "Enter" && ev.key !== " ") return;
    ev.preventDefault();
    const el = s.parentElement;
    pick(el.id, [...el.children].indexOf(s));
  }

  function closeGate() {
    gate.classList.remove("open", "written");
    $("actions").hidden = true;
    setStatus("");
  }

  async function copy() {
    const c = state.shown;
    if (!c) return;
    // reading order as text, then how to hang it (the layout chosen on the page)
    const text = `上联：${c.upper}\n下联：${c.lower}\n横批：${c.horizontal}\n${HANG[gate.dataset.layout]}`;
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) { // plain http on a LAN kiosk has no clipboard API
      const t = document.createElement("textarea");
      t.value = text;
      document.body.append(t);
      t.select();
      document.execCommand("copy");
      t.remove();
    }
    flash("已复制 / copied");
  }

  // traditional (the default): 上联 on the right post, 横批 read right to left; modern: the mirror. Only the
  // drawing changes (gate.css); the couplet stays in reading order in the document.
  function syncLayout() {
    gate.dataset.layout = radio("layout");
    if (state.shown) takeHome(state.shown);
  }

  function toggle(btn, cls) {
    const on = gate.classList.toggle(cls);
    btn.setAttribute("aria-pressed", String(on));
    if (state.shown) takeHome(state.shown);
  }

  // ------------------------------------------------------------------ small helpers
  // on a phone the form sits under the gate: bring the gate back into view as it opens
  function reveal() {
    const top = $("scene").getBoundingClientRect().top;
    if (top < 0) {
      const calm = matchMedia("(prefers-reduced-motion: reduce)").matches;
      $("scene").scrollIntoView({ behavior: calm ? "auto" : "smooth", block: "start" });
    }
  }
  function busy(on) {
    state.busy = on;
    $("open").setAttribute("aria-busy", String(on));
    for (const id of ["again", "new-lower", "rewrite", "new-horizontal"]) $(id).disabled = on;
  }
  function showError(msg) { $("error").textContent = msg; }
  function setStatus(msg) { $("status").textContent = msg; }
  let toastTimer = 0;
  function flash(msg) {
    $("toast").textContent = msg;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { $("toast").textContent = ""; }, 2500);
  }

  function reset() {
    closeGate();
    $("ask").reset();
    syncLayout();
    showError("");
    syncChips();
    for (const [id, cls] of [["marks", "marks"], ["ink", "gold-ink"]]) {
      gate.classList.remove(cls);
      $(id).setAttribute("aria-pressed", "false");
    }
    state.request = state.shown = null;
    together.locks.clear();
    $("take").hidden = true;
  }

  async function loadYear() {
    try {
      const r = await fetch("/api/v1/year");
      const y = await r.json();
      const [yy, mm, dd] = y.spring_festival.split("-").map(Number);
      $("year").textContent = `${y.label} · 春节 ${yy}年${mm}月${dd}日`;
      $("inside-year").textContent = y.label;
      const chip = $("zodiac-chip");
      chip.textContent = y.zodiac;
      chip.title = `${y.label}`;
      chip.hidden = false;
    } catch (e) { /* the year line is decoration; the gate works without it */ }
  }

  // ------------------------------------------------------------------ wiring
  $("ask").addEventListener("submit", openGate);
  $("q").addEventListener("input", syncChips);
  document.querySelectorAll(".chip").forEach((b) => b.addEventListener("click", () => toggleChip(b)));
  $("again").addEventListener("click", another);
  $("marks").addEventListener("click", (e) => toggle(e.currentTarget, "marks"));
  $("ink").addEventListener("click", (e) => toggle(e.currentTarget, "gold-ink"));
  $("copy").addEventListener("click", copy);
  $("print").addEventListener("click", () => window.print());
  $("close").addEventListener("click", closeGate);
  for (const side of ["upper", "lower"]) {
    $(side).addEventListener("click", onChar);
    $(side).addEventListener("keydown", onChar);
  }
  $("lock").addEventListener("click", toggleLock);
  $("new-lower").addEventListener("click", newLower);
  $("rewrite").addEventListener("click", rewriteOpen);
  $("new-horizontal").addEventListener("click", newHorizontal);
  document.querySelectorAll('input[name="layout"]').forEach((r) => r.addEventListener("change", syncLayout));
  syncLayout(); // a restored form may hold the modern choice
  loadYear();

  if (kiosk) {
    let idle = 0;
    const touched = () => {
      clearTimeout(idle);
      idle = setTimeout(reset, idleMs);
    };
    for (const ev of ["pointerdown", "keydown", "input"]) document.addEventListener(ev, touched, { passive: true });
    document.addEventListener("pointerdown", () => {
      if (!document.fullscreenElement && root.requestFullscreen) root.requestFullscreen().catch(() => {});
    }, { once: true });
    document.addEventListener("contextmenu", (e) => e.preventDefault());
    touched();
  }
})();
