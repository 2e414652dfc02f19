// The adapter: the driver protocol (PROTOCOL.md) around the store of store.go.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync"
)

func main() {
	var stores sync.Map // store id -> *Store
	var asked sync.Map  // request id -> chan any, for the driver's answer to its clock question
	var out sync.Mutex
	encoder := json.NewEncoder(os.Stdout) // one line per Encode
	send := func(line map[string]any) {
		out.Lock()
		defer out.Unlock()
		encoder.Encode(line)
	}
	write := func(id any, result any, err error) {
		answer := map[string]any{"id": id, "ok": result}
		if inv, ok := err.(Invalid); ok {
			answer = map[string]any{"id": id, "error": map[string]any{
				"kind": "InvalidArgument", "name": inv.Name, "message": inv.Name}}
		} else if err != nil {
			answer = map[string]any{"id": id, "error": map[string]any{
				"kind": "StorageError", "indeterminate": false, "message": err.Error()}}
		}
		send(answer)
	}
	// The clock of request r, which the store reads inside its lock: r's now, or, when that is
	// "ask", the driver's answer to a question asked at the reading (PROTOCOL.md, "The clock").
	clock := func(r map[string]any) func() any {
		return func() any {
			if r["now"] != "ask" {
				return r["now"]
			}
			answer := make(chan any, 1)
			asked.Store(r["id"], answer)
			send(map[string]any{"clock": r["id"]})
			return <-answer
		}
	}
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var running sync.WaitGroup
	for lines.Scan() {
		decoder := json.NewDecoder(bytes.NewReader(lines.Bytes()))
		decoder.UseNumber() // integers up to 2^64-1, exactly (D8)
		var r map[string]any
		if decoder.Decode(&r) != nil {
			continue
		}
		if loneSurrogate(lines.Bytes()) { // not Unicode (D9): json would decode it as U+FFFD
			write(r["id"], nil, Invalid{"Unrepresentable"})
			continue
		}
		switch r["op"] {
		case nil: // the driver's answer to a clock question
			if answer, ok := asked.LoadAndDelete(r["clock"]); ok {
				answer.(chan any) <- r["now"]
			}
		case "hello":
			write(r["id"], map[string]any{"protocol": 3, "durable": false, "power_cuts": nil}, nil)
		case "open": // in order: later requests name the store
			stores.Store(r["store"], NewStore())
			write(r["id"], nil, nil)
		case "close": // in order too: the driver sends it once the store is done with
			stores.Delete(r["store"])
			write(r["id"], nil, nil)
		default: // concurrently: answers may go out in any order
			running.Add(1)
			go func() {
				defer running.Done()
				s, ok := stores.Load(r["store"])
				if !ok {
					write(r["id"], nil, Invalid{"Unrepresentable"})
					return
				}
				result, err := s.(*Store).Run(r, clock(r))
				write(r["id"], result, err)
			}()
		}
	}
	running.Wait()
}
