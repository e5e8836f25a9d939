// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
)

const (
	// MaxMessageBytes bounds a WebSocket message a syncer sends through its
	// tunnel. remotedialer sends a connection's data as io.Copy reads it
	// (32 KiB at most, plus a header of a few varints), control messages
	// of at most a few hundred bytes, and the list of the connections it
	// holds open (8 bytes per connection, once a minute), which it reads
	// whole (io.ReadAll) on the server; 256 KiB fits 32768 connections.
	// Nothing bigger is ever sent by a real syncer.
	MaxMessageBytes = 256 << 10
	// MaxTunnelsPerToken bounds the tunnels one token holds open at once: a
	// syncer holds one, and two for a moment while it reconnects before the
	// server has noticed the old one is gone.
	MaxTunnelsPerToken = 3
)

// ErrMessageTooLarge is why a tunnel closed on a message over the limit.
type ErrMessageTooLarge struct {
	Size, Limit int64
}

func (e ErrMessageTooLarge) Error() string {
	return fmt.Sprintf("the syncer sent a WebSocket message of at least %d bytes through its tunnel, over the limit of %d: closing the tunnel", e.Size, e.Limit)
}

// frameMeter follows the WebSocket frames (RFC 6455, section 5.2) a client
// sends as they pass, and fails as soon as a frame header announces that
// the message it belongs to goes past the limit, before any of that
// payload is read: what the tunnel library would buffer is never read.
// It fails too on what no WebSocket client sends (a control frame over 125
// bytes, a length with its top bit set) and, with checkType set, on a
// message whose remotedialer type checkType refuses.
type frameMeter struct {
	limit     int64
	checkType func(messageType int64) error

	header  [14]byte
	have    int   // bytes of the current header read
	payload int64 // bytes of the current frame's payload still to come
	message int64 // bytes of the current data message so far
	err     error

	// The start of the current data message, unmasked, until its type is
	// known.
	data      bool // the current frame is a data frame
	mask      [4]byte
	maskPos   int
	prefix    [3 * binary.MaxVarintLen64]byte
	prefixLen int
	typeKnown bool
}

// Message types of remotedialer a syncer sends: data, errors (a connection
// closed), back pressure, and the list of its connections. It never opens
// connections (Connect) nor speaks as a peer server (AddClient,
// RemoveClient): the server would keep the remote clients such messages
// announce, without bound.
const (
	rdData            = 1
	rdError           = 3
	rdPause           = 6
	rdResume          = 7
	rdSyncConnections = 8
)

// syncerMessageType refuses the remotedialer messages a syncer never sends.
func syncerMessageType(t int64) error {
	switch t {
	case rdData, rdError, rdPause, rdResume, rdSyncConnections:
		return nil
	}
	return fmt.Errorf("the syncer sent a tunnel message of type %d, which a syncer never sends: closing the tunnel", t)
}

// headerLength is the length of a frame header whose second byte is b1.
func headerLength(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4 // masking key
	}
	return n
}

// feed takes the next bytes of the stream; once it fails, it keeps failing.
func (m *frameMeter) feed(p []byte) error {
	for len(p) > 0 && m.err == nil {
		if m.payload > 0 {
			skip := min(int64(len(p)), m.payload)
			if m.data && !m.typeKnown && m.checkType != nil {
				m.err = m.sniff(p[:skip])
			}
			m.payload -= skip
			p = p[skip:]
			continue
		}
		m.header[m.have] = p[0]
		m.have++
		p = p[1:]
		if m.have < 2 || m.have < headerLength(m.header[1]) {
			continue
		}
		m.err = m.frame()
		m.have = 0
	}
	return m.err
}

// frame checks a complete frame header.
func (m *frameMeter) frame() error {
	b0, b1 := m.header[0], m.header[1]
	opcode := b0 & 0x0f
	var length int64
	switch n := b1 & 0x7f; n {
	case 126:
		length = int64(binary.BigEndian.Uint16(m.header[2:4]))
	case 127:
		l := binary.BigEndian.Uint64(m.header[2:10])
		if l>>63 != 0 {
			return fmt.Errorf("a WebSocket frame length with its most significant bit set")
		}
		length = int64(l)
	default:
		length = int64(n)
	}
	switch {
	case opcode >= 8: // close, ping, pong
		if length > 125 {
			return fmt.Errorf("a WebSocket control frame of %d bytes (125 at most)", length)
		}
	case opcode == 0: // continuation
		m.message += length
	default: // a new message
		m.message = length
		m.prefixLen, m.typeKnown = 0, false
	}
	m.data = opcode < 8
	if b1&0x80 != 0 {
		copy(m.mask[:], m.header[headerLength(b1)-4:])
	} else {
		m.mask = [4]byte{}
	}
	m.maskPos = 0
	if m.message > m.limit {
		return ErrMessageTooLarge{Size: m.message, Limit: m.limit}
	}
	m.payload = length
	return nil
}

// sniff reads the start of a data message, unmasked, until it knows the
// message's remotedialer type (three varints: id, connection id, type).
func (m *frameMeter) sniff(p []byte) error {
	for _, b := range p {
		if m.prefixLen == len(m.prefix) {
			break
		}
		m.prefix[m.prefixLen] = b ^ m.mask[m.maskPos%4]
		m.prefixLen++
		m.maskPos++
	}
	rest := m.prefix[:m.prefixLen]
	var t int64
	for range 3 {
		v, n := binary.Varint(rest)
		if n == 0 {
			return nil // more to come
		}
		if n < 0 {
			return fmt.Errorf("the syncer sent a tunnel message with a malformed header: closing the tunnel")
		}
		t, rest = v, rest[n:]
	}
	m.typeKnown = true
	return m.checkType(t)
}

// meteredConn is a server's side of a tunnel connection: a read that would
// take a message past the limit fails, and closes the connection.
type meteredConn struct {
	net.Conn
	mu       sync.Mutex
	meter    frameMeter
	onFailed func(error)
	once     sync.Once
}

func newMeteredConn(c net.Conn, limit int64, onFailed func(error)) *meteredConn {
	return &meteredConn{Conn: c, meter: frameMeter{limit: limit, checkType: syncerMessageType}, onFailed: onFailed}
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		merr := c.meter.feed(p[:n])
		c.mu.Unlock()
		if merr != nil {
			c.once.Do(func() {
				if c.onFailed != nil {
					c.onFailed(merr)
				}
				_ = c.Conn.Close()
			})
			return 0, merr
		}
	}
	return n, err
}
