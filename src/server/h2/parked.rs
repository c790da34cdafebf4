//! Parked HTTP/2 connections wait in their accept loop's idle set (see
//! [`crate::server::idle`]) as idle HTTP/1.1 connections do: the socket in
//! the set's epoll, the connection's state (the gate with its HPACK table,
//! the ledger, the streams' counts) in one box, and no task. A task of
//! sluice costs several kilobytes (its future, its timers); the box about
//! one. A readable socket resumes the connection in a task of its own
//! ([`resume`]); a deadline, a stop or a worker out of
//! `worker_connections` sends it its `GOAWAY` before the close
//! ([`Parked::goodbye`]). A TLS connection cannot leave its task (rustls'
//! state is its stream's): it waits there, parked all the same.

use super::io::H2Io;
use super::stream::Streams;
use super::{This, serve};
use crate::conn_state::Conn;
use crate::connlimit::WorkerSlot;
use crate::server::Shared;
use crate::server::conn::ClientStream;
use crate::server::idle::{Entry, IdleSet};
use std::sync::Arc;
use tokio::sync::watch;

/// Where a connection may wait while parked, and its
/// `worker_connections` slot, which goes with it.
pub(crate) struct Parking {
    idle: Option<Arc<IdleSet>>,
    slot: Option<WorkerSlot>,
}

/// A connection waiting in the idle set: all it keeps but its socket.
pub(crate) struct Parked {
    io: Box<H2Io<()>>,
    conn: Arc<Conn>,
    streams: Arc<Streams>,
    list_max: u32,
}

impl Parking {
    pub(crate) fn new(idle: Option<Arc<IdleSet>>, slot: WorkerSlot) -> Parking {
        Parking {
            idle,
            slot: Some(slot),
        }
    }

    /// Moves a parked connection's socket to the idle set: `Ok` when the
    /// task is done with it (it waits there, or it could not and was
    /// closed); `Err` gives `io` back to wait in its task (TLS, no set, no
    /// deadline).
    pub(super) fn wait_in_idle_set<S: ClientStream>(
        &mut self,
        this: &This,
        io: Box<H2Io<S>>,
    ) -> Result<(), Box<H2Io<S>>> {
        let deadline = this.streams.idle_deadline(&this.conn.state);
        let (Some(idle), None, Some(deadline)) = (&self.idle, &this.conn.tls, deadline) else {
            return Err(io);
        };
        let Some(slot) = self.slot.take() else {
            return Err(io);
        };
        let metrics = &this.shared.env.metrics;
        let (socket, io) = io.swap_socket(());
        let Some(stream) = socket.into_plain().and_then(|t| t.into_std().ok()) else {
            this.streams.end();
            metrics.connection_closed();
            return Ok(());
        };
        let parked = Parked {
            io,
            conn: this.conn.clone(),
            streams: this.streams.clone(),
            list_max: this.list_max,
        };
        let entry = Entry {
            stream,
            id: this.conn.id,
            slot,
            header_until: None,
            h2: Some(Box::new(parked)),
            // (kept in the parked connection's `Conn`)
            proxy: None,
        };
        metrics.h2_parked(1);
        if let Err(entry) = idle.park(entry, deadline) {
            closing(&this.shared, entry);
        }
        Ok(())
    }
}

impl Parked {
    /// The `GOAWAY` (NO_ERROR, naming the last stream) it gets before its
    /// close.
    pub(crate) fn goodbye(&self) -> [u8; 17] {
        self.io.goodbye()
    }
}

/// A connection of the idle set closes (its deadline, a stop, a worker out
/// of `worker_connections`): an HTTP/2 one gets its `GOAWAY` first, as
/// from a parked task. Counted closed.
pub(crate) fn closing(shared: &Shared, entry: Entry) {
    if let Some(parked) = &entry.h2 {
        use std::io::Write;
        shared.env.metrics.h2_parked(-1);
        parked.streams.end();
        // Non-blocking, into an idle socket's empty buffer.
        let _ = (&entry.stream).write(&parked.goodbye());
    }
    shared.env.metrics.connection_closed();
}

/// A parked connection's socket is readable: a task again, whose fresh
/// hyper connection reads the replay first.
pub(crate) fn resume(
    shared: &Arc<Shared>,
    stopping: &watch::Receiver<bool>,
    idle: &Arc<IdleSet>,
    (stream, slot): (std::net::TcpStream, WorkerSlot),
    parked: Parked,
) {
    shared.env.metrics.h2_parked(-1);
    let Ok(tcp) = tokio::net::TcpStream::from_std(stream) else {
        parked.streams.end();
        shared.env.metrics.connection_closed();
        return;
    };
    let Parked {
        io,
        conn,
        streams,
        list_max,
    } = parked;
    let ((), mut io) = io.swap_socket(tcp);
    io.wake(&[]);
    let this = This {
        shared: shared.clone(),
        conn,
        streams,
        list_max,
    };
    let parking = Parking::new(Some(idle.clone()), slot);
    let stopping = stopping.clone();
    tokio::spawn(crate::clock::Fresh::new(serve(this, io, stopping, parking)));
}
