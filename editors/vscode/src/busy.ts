/**
 * Is Talaria working? Pure: no `vscode` import.
 *
 * Busy while a command request is in flight, and for `quietMs` after the last `talaria/update`
 * (turns started by code actions stream updates the extension did not ask for).
 */
export class BusyTracker {
  private inflight = 0;
  private lastActivity = Number.NEGATIVE_INFINITY;

  constructor(private readonly quietMs = 3000) {}

  begin(): void {
    this.inflight += 1;
  }

  /** A command finished: when none is left, the server is done, so forget recent activity. */
  end(): void {
    this.inflight = Math.max(0, this.inflight - 1);
    if (this.inflight === 0) {
      this.lastActivity = Number.NEGATIVE_INFINITY;
    }
  }

  activity(now: number): void {
    this.lastActivity = now;
  }

  busy(now: number): boolean {
    return this.inflight > 0 || now - this.lastActivity < this.quietMs;
  }

  /** Milliseconds until idle when only activity keeps it busy; undefined otherwise. */
  idleIn(now: number): number | undefined {
    if (this.inflight > 0 || !this.busy(now)) {
      return undefined;
    }
    return this.quietMs - (now - this.lastActivity);
  }
}
