// Synced sources (/v1/sources): add a website, folder, git repository or mailbox to the current namespace,
// see each one's last sync, sync it now, remove it. Secrets are typed here and never shown back.

import { deleteJson, getJson, postJson } from "./api.js";
import { el } from "./dom.js";

const ORIGIN = { website: "url", folder: "path", git: "url", imap: "host" };
const HINT = {
  website: "https://example.org/sitemap.xml or a start page",
  folder: "/srv/docs (a directory on the server)",
  git: "https://git.example/team/docs.git",
  imap: "imap.example.org",
};

function counts(last) {
  if (!last) return "never synced";
  const parts = ["added", "updated", "removed", "unchanged", "failed"].map((k) => `${last[k]} ${k}`);
  const when = new Date(last.finished_at * 1000).toLocaleString();
  return `${last.status} ${when}: ${parts.join(", ")}`;
}

/** The Sources card: `elements` are its list, form, type select, origin input and extra (mailbox) fields. */
export class Sources {
  constructor({ elements, namespace, onError, onSynced }) {
    Object.assign(this, elements);
    this.namespace = namespace; // () => the current namespace
    this.onError = onError;
    this.onSynced = onSynced; // a sync changed documents: the documents card refreshes
    this.type.addEventListener("change", () => this.showFields());
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.add();
    });
    this.showFields();
  }

  showFields() {
    this.origin.placeholder = HINT[this.type.value];
    this.mailbox.hidden = this.type.value !== "imap";
  }

  async refresh() {
    try {
      const listed = await getJson("sources");
      const mine = listed.data.filter((source) => source.namespace === this.namespace());
      this.list.replaceChildren(...mine.map((source) => this.row(source)));
      if (!mine.length) this.list.append(el("li", { class: "subtle small" }, "No synced source in this namespace."));
    } catch (error) {
      this.onError(error);
    }
  }

  row(source) {
    const origin = source.settings[ORIGIN[source.type]] || "";
    const errors = (source.last_sync && source.last_sync.errors) || [];
    const sync = el("button", { type: "button", class: "link-button" }, "Sync now");
    sync.addEventListener("click", () => this.sync(source.id, sync));
    const remove = el("button", { type: "button", class: "link-button" }, "Remove");
    remove.addEventListener("click", () => this.remove(source.id));
    return el(
      "li",
      { class: "source-row", "data-source-id": source.id },
      el("div", {}, el("strong", {}, source.type), " ", el("span", { class: "source-origin" }, origin)),
      el("div", { class: "subtle small source-status" }, `${source.status} · ${counts(source.last_sync)}`),
      errors.length ? el("div", { class: "small source-errors" }, `${errors[0].item}: ${errors[0].message}`) : null,
      el("div", { class: "row" }, sync, remove),
    );
  }

  async add() {
    const type = this.type.value;
    const body = { type, namespace: this.namespace(), [ORIGIN[type]]: this.origin.value.trim() };
    if (type === "imap") {
      body.username = this.username.value.trim();
      body.password = this.password.value;
    }
    try {
      const source = await postJson("sources", body);
      this.origin.value = "";
      this.password.value = "";
      await this.refresh();
      await this.sync(source.id);
    } catch (error) {
      this.onError(error);
    }
  }

  async sync(id, button) {
    if (button) button.disabled = true;
    try {
      await postJson(`sources/${encodeURIComponent(id)}/sync?wait=true`, {});
      this.onSynced();
    } catch (error) {
      this.onError(error);
    } finally {
      await this.refresh();
    }
  }

  async remove(id) {
    try {
      await deleteJson(`sources/${encodeURIComponent(id)}`);
      this.onSynced();
    } catch (error) {
      this.onError(error);
    }
    await this.refresh();
  }
}
