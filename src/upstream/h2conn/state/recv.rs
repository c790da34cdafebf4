//! The upstream's side of [`super::State`]: each frame it sends, applied
//! to the streams and windows; a fault on one stream resets it, a fault
//! on the connection ends it (the error code returned).

use super::fields;
use super::{
    ACK, BLOCK_BYTES_MAX, BLOCK_FRAMES_MAX, Block, COMPRESSION_ERROR, CONTINUATION, DATA,
    EMPTY_DATA_MAX, END_HEADERS, END_STREAM, ENHANCE_YOUR_CALM, FLOW_CONTROL_ERROR,
    FRAME_SIZE_ERROR, Failure, GOAWAY, HEADERS, MAX_HEADER_LIST, PADDED, PING, PRIORITY,
    PROTOCOL_ERROR, PUSH_PROMISE, RST_STREAM, SETTINGS, State, WINDOW_MAX, WINDOW_UPDATE, frame,
};
use crate::http2::headers_fragment;
use bytes::{Bytes, BytesMut};

impl State {
    /// One frame read from the upstream. A connection error queues GOAWAY
    /// and ends the connection.
    pub(in super::super) fn frame(&mut self, kind: u8, flags: u8, id: u32, payload: &[u8]) {
        if let Err(code) = self.on_frame(kind, flags, id, payload) {
            self.error(code);
        }
    }

    fn on_frame(&mut self, kind: u8, flags: u8, id: u32, payload: &[u8]) -> Result<(), u32> {
        if self.ended.is_some() {
            return Ok(());
        }
        if let Some(block) = &mut self.block {
            if kind != CONTINUATION || id != block.stream {
                return Err(PROTOCOL_ERROR);
            }
            block.frames += 1;
            block.bytes.extend_from_slice(payload);
            if block.frames > BLOCK_FRAMES_MAX || block.bytes.len() > BLOCK_BYTES_MAX {
                return Err(ENHANCE_YOUR_CALM);
            }
            if flags & END_HEADERS != 0 {
                let block = self.block.take().expect("a block");
                return self.on_block(block.stream, block.end_stream, &block.bytes);
            }
            return Ok(());
        }
        if kind != DATA {
            self.empty_data = 0;
        }
        match kind {
            DATA => self.on_data(flags, id, payload),
            HEADERS => self.on_headers(flags, id, payload),
            PRIORITY if id == 0 => Err(PROTOCOL_ERROR),
            PRIORITY if payload.len() != 5 => Err(FRAME_SIZE_ERROR),
            RST_STREAM => self.on_reset(id, payload),
            SETTINGS => self.on_settings(flags, id, payload),
            PUSH_PROMISE | CONTINUATION => Err(PROTOCOL_ERROR),
            PING => self.on_ping(flags, id, payload),
            GOAWAY => self.on_goaway(id, payload),
            WINDOW_UPDATE => self.on_window_update(id, payload),
            // PRIORITY is advice; unknown kinds are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// A stream id the upstream names: 0 is the connection's, and it may
    /// open none (no push), so an even one or one sluice never opened is
    /// a protocol error.
    fn check_stream(&self, id: u32) -> Result<(), u32> {
        if id == 0 || id % 2 == 0 || id >= self.next_id {
            return Err(PROTOCOL_ERROR);
        }
        Ok(())
    }

    fn on_data(&mut self, flags: u8, id: u32, mut payload: &[u8]) -> Result<(), u32> {
        self.check_stream(id)?;
        let len = payload.len() as u32;
        if i64::from(len) > self.recv_window {
            return Err(FLOW_CONTROL_ERROR);
        }
        self.recv_window -= i64::from(len);
        self.release(len);
        if flags & PADDED != 0 {
            let pad = usize::from(*payload.first().ok_or(PROTOCOL_ERROR)?);
            if pad >= payload.len() {
                return Err(PROTOCOL_ERROR);
            }
            payload = &payload[1..payload.len() - pad];
        }
        let end = flags & END_STREAM != 0;
        if payload.is_empty() && !end {
            self.empty_data += 1;
            if self.empty_data > EMPTY_DATA_MAX {
                return Err(ENHANCE_YOUR_CALM);
            }
        } else {
            self.empty_data = 0;
        }
        let taken = payload.len() as u32;
        let Some(slot) = self.streams.get_mut(&id).filter(|s| !s.recv_closed()) else {
            return Ok(());
        };
        let fault = if !slot.got_head {
            Some(PROTOCOL_ERROR)
        } else if i64::from(len) > slot.recv_window {
            Some(FLOW_CONTROL_ERROR)
        } else {
            slot.length
                .as_mut()
                .and_then(|left| match left.checked_sub(u64::from(taken)) {
                    Some(l) if !end || l == 0 => {
                        *left = l;
                        None
                    }
                    _ => Some(PROTOCOL_ERROR),
                })
        };
        if let Some(code) = fault {
            return self.stream_error(id, code);
        }
        slot.recv_window -= i64::from(len);
        // Copied out of the read buffer: a piece held (by a client that
        // reads slowly) must not hold the whole buffer it was read into.
        if taken > 0 {
            slot.data.push_back(Bytes::copy_from_slice(payload));
        }
        slot.recv_end = end;
        slot.wake();
        if end {
            self.settle(id);
        }
        // Padding: given back to the stream's window at once.
        self.give_back(id, len - taken);
        Ok(())
    }

    fn on_headers(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), u32> {
        self.check_stream(id)?;
        let (fragment, _) = headers_fragment(flags, payload).map_err(|_| PROTOCOL_ERROR)?;
        let end_stream = flags & END_STREAM != 0;
        if flags & END_HEADERS != 0 {
            return self.on_block(id, end_stream, fragment);
        }
        let mut bytes = BytesMut::with_capacity(fragment.len() * 2);
        bytes.extend_from_slice(fragment);
        self.block = Some(Block {
            stream: id,
            end_stream,
            bytes,
            frames: 1,
        });
        Ok(())
    }

    /// A whole header block: decoded (always: the table is the
    /// connection's), then the stream's head or trailers.
    fn on_block(&mut self, id: u32, end_stream: bool, block: &[u8]) -> Result<(), u32> {
        let decoded = self
            .decoder
            .decode(block, MAX_HEADER_LIST as usize)
            .map_err(|_| COMPRESSION_ERROR)?;
        let Some(slot) = self.streams.get_mut(&id).filter(|s| !s.recv_closed()) else {
            return Ok(());
        };
        if decoded.over {
            return self.stream_error(id, PROTOCOL_ERROR);
        }
        if slot.got_head {
            if !end_stream {
                return self.stream_error(id, PROTOCOL_ERROR);
            }
            match fields::trailers(decoded.fields) {
                Ok(t) if slot.length.is_none_or(|l| l == 0) => slot.trailers = Some(t),
                _ => return self.stream_error(id, PROTOCOL_ERROR),
            }
        } else {
            let Ok(head) = fields::head(decoded.fields) else {
                return self.stream_error(id, PROTOCOL_ERROR);
            };
            if head.status.is_informational() {
                // 1xx: another head follows (never with END_STREAM).
                if end_stream || head.status == http::StatusCode::SWITCHING_PROTOCOLS {
                    return self.stream_error(id, PROTOCOL_ERROR);
                }
                return Ok(());
            }
            // (END_STREAM with a non-zero content-length is a HEAD's or a
            // 304's: not checked here.)
            slot.length = head.length;
            slot.got_head = true;
            slot.head = Some(head);
        }
        slot.recv_end = end_stream;
        slot.wake();
        if end_stream {
            self.settle(id);
        }
        Ok(())
    }

    /// The upstream broke the rules on one stream: reset it, and the call
    /// fails as reset with `code`.
    fn stream_error(&mut self, id: u32, code: u32) -> Result<(), u32> {
        self.discard(id);
        if let Some(slot) = self.streams.get_mut(&id) {
            slot.wake();
        }
        self.reset(id, code);
        Ok(())
    }

    fn on_reset(&mut self, id: u32, payload: &[u8]) -> Result<(), u32> {
        self.check_stream(id)?;
        let code = u32::from_be_bytes(payload.try_into().map_err(|_| FRAME_SIZE_ERROR)?);
        self.fail(id, Failure::Reset(code));
        Ok(())
    }

    fn on_settings(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), u32> {
        if id != 0 {
            return Err(PROTOCOL_ERROR);
        }
        if flags & ACK != 0 {
            return if payload.is_empty() {
                Ok(())
            } else {
                Err(FRAME_SIZE_ERROR)
            };
        }
        if payload.len() % 6 != 0 {
            return Err(FRAME_SIZE_ERROR);
        }
        for s in payload.chunks_exact(6) {
            let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            match u16::from_be_bytes([s[0], s[1]]) {
                2 if v > 1 => return Err(PROTOCOL_ERROR),
                3 => {
                    self.max_open = v as usize;
                    for w in self.waiting.drain(..) {
                        w.wake();
                    }
                }
                4 => {
                    if i64::from(v) > WINDOW_MAX {
                        return Err(FLOW_CONTROL_ERROR);
                    }
                    let delta = i64::from(v) - self.initial_window;
                    self.initial_window = i64::from(v);
                    for slot in self.streams.values_mut() {
                        slot.send_window += delta;
                        if slot.send_window > WINDOW_MAX {
                            return Err(FLOW_CONTROL_ERROR);
                        }
                    }
                    if delta > 0 {
                        self.blocked.extend(self.streams.keys());
                    }
                }
                5 if !(16_384..=16_777_215).contains(&v) => return Err(PROTOCOL_ERROR),
                5 => self.max_frame = v as usize,
                _ => {}
            }
        }
        frame(&mut self.out, 0, SETTINGS, ACK, 0);
        self.blocked.sort_unstable();
        self.blocked.dedup();
        self.pump_blocked();
        self.wake_driver();
        Ok(())
    }

    fn on_ping(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), u32> {
        if id != 0 {
            return Err(PROTOCOL_ERROR);
        }
        if payload.len() != 8 {
            return Err(FRAME_SIZE_ERROR);
        }
        if flags & ACK == 0 {
            frame(&mut self.out, 8, PING, ACK, 0);
            self.out.extend_from_slice(payload);
            self.wake_driver();
        }
        Ok(())
    }

    /// GOAWAY: the streams above its last one were never processed (they
    /// fail, and may go elsewhere); those below it go on; no new stream.
    fn on_goaway(&mut self, id: u32, payload: &[u8]) -> Result<(), u32> {
        if id != 0 {
            return Err(PROTOCOL_ERROR);
        }
        if payload.len() < 8 {
            return Err(FRAME_SIZE_ERROR);
        }
        let last =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & !(1 << 31);
        let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
        self.goaway = true;
        let above: Vec<u32> = self.streams.keys().copied().filter(|&s| s > last).collect();
        for s in above {
            self.fail(s, Failure::GoAway(code));
        }
        for w in self.waiting.drain(..) {
            w.wake();
        }
        Ok(())
    }

    fn on_window_update(&mut self, id: u32, payload: &[u8]) -> Result<(), u32> {
        let inc =
            u32::from_be_bytes(payload.try_into().map_err(|_| FRAME_SIZE_ERROR)?) & !(1 << 31);
        if id == 0 {
            if inc == 0 {
                return Err(PROTOCOL_ERROR);
            }
            self.send_window += i64::from(inc);
            if self.send_window > WINDOW_MAX {
                return Err(FLOW_CONTROL_ERROR);
            }
            self.pump_blocked();
            return Ok(());
        }
        self.check_stream(id)?;
        let Some(slot) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if inc == 0 {
            return self.stream_error(id, PROTOCOL_ERROR);
        }
        slot.send_window += i64::from(inc);
        if slot.send_window > WINDOW_MAX {
            return self.stream_error(id, FLOW_CONTROL_ERROR);
        }
        self.pump(id, true);
        Ok(())
    }
}
