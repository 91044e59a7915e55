//! Fair shares of a bounded resource between clients: decision slots, bytes of bodies being read,
//! handshakes worked on at once. A [`Fair`] holds `capacity` units; a client (its [`Source`], the
//! peer's IP address) takes units with [`Fair::acquire`] and gives them back by dropping the
//! [`Share`].
//!
//! - **Turns.** Clients that must wait are served in turn, one grant per client per round, first
//!   come first served within one client: a client with 500 requests waiting gets one unit when a
//!   client with one request waiting gets one. So one client cannot raise another's latency by
//!   sending more: it waits for its own requests, and others wait for at most one of its grants
//!   per round.
//! - **A cap per client.** No client holds more than `per_source` units at once (its waiting
//!   requests wait for its own units to come back, and others go before them), so a client that
//!   holds units without using them (bodies sent a byte at a time) keeps others' share free.
//! - **Growing shares.** A body being read reserves what it has received so far ([`Share::grow`]),
//!   not what it declared. Growing waits in turn like acquiring, so a full budget could leave every
//!   body half-read and waiting for another; the oldest share that is still growing therefore never
//!   waits (it may take the budget over its capacity by what it still has to read), so one body at a
//!   time always finishes.
//!
//! - **Weighted turns.** A request may say what it costs ([`Fair::acquire_weighted`]: a decision's
//!   CPU grows with its body), and turns are then measured in cost, not in grants (deficit round
//!   robin): each round a waiting client earns [`Fair::QUANTUM`] of credit and is granted while its
//!   credit covers its next request, so a client of 62 KiB requests gets one grant for every four
//!   rounds of another's 4 KiB ones, and their CPU, not their count of requests, is what is shared.
//!
//! Cancel-safe: a waiting future dropped before or after its grant gives back what it was granted.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// Who asks: the peer's IP address (every connection of one Pod, or one node's kubelet, is one
/// client). Requests that reach a handler without a connection (in-process tests) are
/// [`Source::LOCAL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Source(pub IpAddr);

impl Source {
    /// The source of a request that came through no connection.
    pub const LOCAL: Source = Source(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A bounded resource shared in turn between sources. Cheap to clone (one shared state).
#[derive(Clone, Debug)]
pub struct Fair {
    state: Arc<Mutex<State>>,
    capacity: u64,
    per_source: u64,
}

#[derive(Debug)]
struct Waiter {
    n: u64,
    /// What the request costs, in the turns' currency (1 for an unweighted request).
    cost: u64,
    /// The share this request grows, if it grows one (for the oldest share's right to proceed).
    grows: Option<u64>,
    grant: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct State {
    /// Units not held (may go below zero by what the oldest growing share overdraws).
    available: i64,
    held: HashMap<Source, u64>,
    waiting: HashMap<Source, VecDeque<Waiter>>,
    /// Sources with someone waiting, in turn order.
    turns: VecDeque<Source>,
    /// The credit each waiting source has earned and not spent (weighted turns).
    credit: HashMap<Source, u64>,
    /// Shares still growing (bodies being read), by age.
    growing: BTreeSet<u64>,
    next_id: u64,
}

impl State {
    fn fits(&self, source: Source, n: u64, per_source: u64) -> bool {
        let held = self.held.get(&source).copied().unwrap_or(0);
        self.available >= n as i64 && held + n <= per_source
    }

    fn take(&mut self, source: Source, n: u64) {
        self.available -= n as i64;
        *self.held.entry(source).or_default() += n;
    }

    fn give_back(&mut self, source: Source, n: u64) {
        self.available += n as i64;
        if let Some(h) = self.held.get_mut(&source) {
            *h = h.saturating_sub(n);
            if *h == 0 {
                self.held.remove(&source);
            }
        }
    }

    /// Grants what can be granted now, a turn at a time.
    fn dispatch(&mut self, per_source: u64) {
        // The oldest growing share proceeds whatever the budget says.
        if let Some(&oldest) = self.growing.first() {
            self.grant_growth_of(oldest);
        }
        let mut idle_turns = 0;
        while let Some(source) = self.turns.pop_front() {
            let Some(queue) = self.waiting.get_mut(&source) else { continue };
            while queue.front().is_some_and(|w| w.grant.is_closed()) {
                queue.pop_front();
            }
            let Some(head) = queue.front() else {
                self.waiting.remove(&source);
                self.credit.remove(&source);
                continue;
            };
            let (n, cost) = (head.n, head.cost);
            let held = self.held.get(&source).copied().unwrap_or(0);
            if held + n > per_source {
                // Over its own cap: its turn passes to the others.
                self.turns.push_back(source);
                idle_turns += 1;
                if idle_turns > self.turns.len() {
                    return;
                }
                continue;
            }
            if self.available < n as i64 {
                // Next in turn when units come back.
                self.turns.push_front(source);
                return;
            }
            // Weighted: a turn taken while units are free earns a quantum of credit, and the head
            // goes when the credit covers it (at most cost / QUANTUM turns, so this loop ends);
            // no credit is earned while nothing can be granted.
            let credit = self.credit.entry(source).or_default();
            if *credit < cost {
                *credit = credit.saturating_add(Fair::QUANTUM);
                if *credit < cost {
                    // Progress: the over-cap count starts again.
                    idle_turns = 0;
                    self.turns.push_back(source);
                    continue;
                }
            }
            idle_turns = 0;
            let Some(w) = queue.pop_front() else { continue };
            let empty = queue.is_empty();
            self.take(source, n);
            if w.grant.send(()).is_err() {
                self.give_back(source, n);
            } else if let Some(c) = self.credit.get_mut(&source) {
                *c = c.saturating_sub(cost);
            }
            if empty {
                // A client that waits no more keeps no credit (deficit round robin).
                self.waiting.remove(&source);
                self.credit.remove(&source);
            } else {
                self.turns.push_back(source);
            }
        }
    }

    /// Grants the waiting growth of share `id`, if any, over the budget.
    fn grant_growth_of(&mut self, id: u64) {
        for (source, queue) in self.waiting.iter_mut() {
            if let Some(at) = queue.iter().position(|w| w.grows == Some(id) && !w.grant.is_closed()) {
                let Some(w) = queue.remove(at) else { return };
                let source = *source;
                self.take(source, w.n);
                if w.grant.send(()).is_err() {
                    self.give_back(source, w.n);
                }
                return;
            }
        }
    }
}

/// Units held by one source; given back when dropped.
#[derive(Debug)]
pub struct Share {
    fair: Fair,
    source: Source,
    n: u64,
    id: u64,
}

impl Fair {
    /// `capacity` units, at most `per_source` held by one source (both at least 1).
    pub fn new(capacity: u64, per_source: u64) -> Fair {
        let capacity = capacity.max(1);
        Fair {
            state: Arc::new(Mutex::new(State { available: capacity as i64, ..State::default() })),
            capacity,
            per_source: per_source.clamp(1, capacity),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Units not held now (0 when overdrawn).
    pub fn available(&self) -> u64 {
        u64::try_from(self.lock().available).unwrap_or(0)
    }

    /// Units `source` holds now.
    pub fn held_by(&self, source: Source) -> u64 {
        self.lock().held.get(&source).copied().unwrap_or(0)
    }

    /// The units in all.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The most one source holds.
    pub fn per_source(&self) -> u64 {
        self.per_source
    }

    /// The credit a waiting client earns per round of weighted turns: a request costing this much
    /// or less goes in one turn.
    pub const QUANTUM: u64 = 16 * 1024;

    /// Waits for `n` units (at most what one source may hold: asking for more takes that much) in
    /// `source`'s turn.
    pub async fn acquire(&self, source: Source, n: u64) -> Share {
        self.acquire_weighted(source, n, 1).await
    }

    /// [`Fair::acquire`] for a request that costs `cost` (a decision's body bytes, say): while
    /// others wait, turns are shared by cost (see the module's "Weighted turns").
    pub async fn acquire_weighted(&self, source: Source, n: u64, cost: u64) -> Share {
        let n = n.min(self.per_source);
        let id = {
            let mut st = self.lock();
            st.next_id += 1;
            st.next_id
        };
        // A cost over 16 quanta counts as 16: a turn never waits more than 16 rounds.
        self.wait(source, n, None, cost.min(16 * Fair::QUANTUM)).await;
        Share { fair: self.clone(), source, n, id }
    }

    /// Takes `n` units without waiting (none when others wait or they do not fit).
    pub fn try_acquire(&self, source: Source, n: u64) -> Option<Share> {
        let n = n.min(self.per_source);
        let mut st = self.lock();
        if !st.turns.is_empty() || !st.fits(source, n, self.per_source) {
            return None;
        }
        st.take(source, n);
        st.next_id += 1;
        Some(Share { fair: self.clone(), source, n, id: st.next_id })
    }

    async fn wait(&self, source: Source, n: u64, grows: Option<u64>, cost: u64) {
        if n == 0 {
            return;
        }
        let granted = {
            let mut st = self.lock();
            let oldest = grows.is_some() && grows == st.growing.first().copied();
            if oldest || (st.turns.is_empty() && st.fits(source, n, self.per_source)) {
                st.take(source, n);
                return;
            }
            let (grant, granted) = oneshot::channel();
            if !st.turns.contains(&source) {
                st.turns.push_back(source);
            }
            st.waiting.entry(source).or_default().push_back(Waiter { n, cost: cost.max(1), grows, grant });
            st.dispatch(self.per_source);
            granted
        };
        // Dropped while waiting: the grant (if one came) goes back.
        let mut guard = Pending { fair: self, source, n, granted: Some(granted) };
        if let Some(rx) = guard.granted.as_mut() {
            let _ = rx.await;
        }
        guard.granted = None;
    }
}

/// A wait in progress; gives back a grant that arrives after the waiter stopped waiting.
struct Pending<'a> {
    fair: &'a Fair,
    source: Source,
    n: u64,
    granted: Option<oneshot::Receiver<()>>,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.granted.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                let mut st = self.fair.lock();
                st.give_back(self.source, self.n);
                st.dispatch(self.fair.per_source);
            }
        }
    }
}

impl Share {
    /// Units held.
    pub fn units(&self) -> u64 {
        self.n
    }

    /// Who holds them.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Marks the share as growing (a body being read): from now on [`Share::grow`] may take it
    /// over its budget when it is the oldest that grows, so some body always finishes.
    pub fn start_growing(&self) {
        self.fair.lock().growing.insert(self.id);
    }

    /// The share no longer grows (its body is read); the next oldest may proceed.
    pub fn stop_growing(&self) {
        let mut st = self.fair.lock();
        if st.growing.remove(&self.id) {
            st.dispatch(self.fair.per_source);
        }
    }

    /// Waits for `n` more units, in turn (the oldest growing share does not wait). A share that
    /// would outgrow what one source may hold takes them at once: whatever bounds its size (a body
    /// limit) bounds that, and waiting could never end.
    pub async fn grow(&mut self, n: u64) {
        if self.n + n > self.fair.per_source {
            self.fair.lock().take(self.source, n);
        } else {
            self.fair.wait(self.source, n, Some(self.id), 1).await;
        }
        self.n += n;
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut st = self.fair.lock();
        st.growing.remove(&self.id);
        st.give_back(self.source, self.n);
        st.dispatch(self.fair.per_source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn src(i: u8) -> Source {
        Source(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)))
    }

    /// The order in which `queued` requests (client, cost), queued one after another behind a
    /// held unit of a one-unit budget, are granted once it is given back; each grant is held
    /// across a yield, so the next waits for it.
    async fn granted_order(queued: &[(u8, u64)]) -> Vec<u8> {
        let fair = Fair::new(1, 1);
        let held = fair.acquire(src(9), 1).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for &(client, cost) in queued {
            let (fair, order) = (fair.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let share = fair.acquire_weighted(src(client), 1, cost).await;
                order.lock().unwrap().push(client);
                tokio::task::yield_now().await;
                drop(share);
            }));
            tokio::task::yield_now().await;
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(fair.available(), 1);
        order.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn waiting_clients_are_served_in_turn_not_in_arrival_order() {
        // Client 1 queues five requests, then client 2 one: client 2 waits for one of client 1's.
        let order = granted_order(&[(1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (2, 1)]).await;
        let second = order.iter().position(|&c| c == 2).unwrap();
        assert!(second <= 1, "client 2 waited behind client 1's backlog: {order:?}");
        // Unweighted, two backlogs alternate (one grant a client a round).
        assert_eq!(
            granted_order(&[(1, 1), (1, 1), (1, 1), (1, 1), (2, 1), (2, 1), (2, 1), (2, 1)]).await,
            [1, 2, 1, 2, 1, 2, 1, 2]
        );
    }

    #[tokio::test]
    async fn weighted_turns_share_cost_not_count() {
        // Client 1 queues four 62 KiB requests, then client 2 eight 4 KiB ones. Client 1's request
        // goes once its credit covers 62 KiB (four turns of 16 KiB), and each turn client 2 is
        // granted its 4 KiB: three of client 2's before client 1's first, four between its first
        // and second, and client 1 is not starved once client 2 runs out.
        let queued: Vec<(u8, u64)> =
            std::iter::repeat_n((1u8, 62 * 1024), 4).chain(std::iter::repeat_n((2u8, 4 * 1024), 8)).collect();
        assert_eq!(granted_order(&queued).await, [2, 2, 2, 1, 2, 2, 2, 2, 1, 2, 1, 1]);
    }

    #[tokio::test]
    async fn a_client_earning_credit_is_not_left_waiting_behind_one_over_its_cap() {
        let fair = Fair::new(2, 1);
        let a = fair.acquire(src(1), 1).await;
        // A waits for a second unit, over its cap; B's costly request must still go at once.
        let over = fair.acquire(src(1), 1);
        tokio::pin!(over);
        assert!(futures::poll!(over.as_mut()).is_pending());
        let b = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            fair.acquire_weighted(src(2), 1, 62 * 1024),
        )
        .await
        .expect("granted with a unit free");
        assert_eq!((fair.available(), b.units()), (0, 1));
        drop((a, b));
        assert_eq!(over.await.units(), 1);
    }

    #[tokio::test]
    async fn one_client_holds_at_most_its_cap_and_the_rest_stays_for_others() {
        let fair = Fair::new(100, 25);
        let a = fair.acquire(src(1), 20).await;
        // A second request of the same client waits for its own units...
        let more = fair.acquire(src(1), 10);
        tokio::pin!(more);
        assert!(futures::poll!(more.as_mut()).is_pending());
        // ...while another client takes its own at once.
        let b = fair.acquire(src(2), 25).await;
        assert_eq!((fair.held_by(src(1)), fair.held_by(src(2)), fair.available()), (20, 25, 55));
        drop(a);
        let c = more.await;
        assert_eq!(c.units(), 10);
        drop((b, c));
        assert_eq!(fair.available(), 100);
        // Asking for more than the cap takes the cap rather than waiting forever.
        assert_eq!(fair.acquire(src(3), 1_000).await.units(), 25);
    }

    #[tokio::test]
    async fn a_dropped_wait_gives_its_units_back() {
        let fair = Fair::new(2, 2);
        let held = fair.acquire(src(1), 2).await;
        let mut waiting = Box::pin(fair.acquire(src(2), 2));
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        drop(held); // granted to the waiter, which is then dropped before it looks
        drop(waiting);
        assert_eq!(fair.available(), 2);
        assert!(fair.try_acquire(src(3), 2).is_some());
    }

    #[tokio::test]
    async fn growing_shares_reserve_what_they_hold_and_the_oldest_always_proceeds() {
        let fair = Fair::new(10, 10);
        let mut first = fair.acquire(src(1), 1).await;
        first.start_growing();
        let mut second = fair.acquire(src(2), 1).await;
        second.start_growing();
        second.grow(5).await;
        first.grow(3).await;
        assert_eq!((first.units(), second.units(), fair.available()), (4, 6, 0));
        {
            // The budget is spent and both want more: the younger waits, the oldest goes over.
            let younger = second.grow(2);
            tokio::pin!(younger);
            assert!(futures::poll!(younger.as_mut()).is_pending());
            first.grow(3).await;
            assert_eq!((first.units(), fair.held_by(src(1))), (7, 7));
            assert_eq!(fair.available(), 0, "overdrawn, shown as empty");
            // Once the oldest is read, the next oldest proceeds, over the budget too.
            first.stop_growing();
            younger.await;
        }
        assert_eq!(second.units(), 8);
        drop(first);
        assert_eq!(fair.available(), 2);
        drop(second);
        assert_eq!(fair.available(), 10);
        // A share that would outgrow a source's cap is not kept waiting forever.
        let mut big = fair.acquire(src(3), 10).await;
        big.grow(5).await;
        assert_eq!(big.units(), 15);
    }
}
