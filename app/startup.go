package app

import (
	"context"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// WaitTitle is the title of the window that waits for a locked database.
const WaitTitle = "Gatehouse — waiting for the database"

// waitRetry is how often WaitForStore tries to open the store again.
const waitRetry = 2 * time.Second

// WaitForStore is for a start that found the database locked by another
// program (err, from [store.Open]): it shows a window that says so, tries
// open again every two seconds, and once it works closes the window and
// calls opened with the store, on the Fyne thread. Quit gives up. The
// returned stop ends the retries; call it after [fyne.App.Run] returns.
func WaitForStore(a fyne.App, err error, open func(context.Context) (*store.Store, error), opened func(*store.Store)) (stop func()) {
	a.Settings().SetTheme(newTheme(a.Settings().Theme()))
	w := a.NewWindow(WaitTitle)
	w.SetIcon(iconResource)
	pr := explain("open the home folder", err)
	icon := canvas.NewImageFromResource(iconResource)
	icon.FillMode = canvas.ImageFillContain
	icon.SetMinSize(fyne.NewSize(56, 56))
	status := text("Trying again every 2 seconds…", secondary)
	detail := wrapText(pr.text, widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder})
	quit := widget.NewButton("Quit", a.Quit)
	bar := widget.NewProgressBarInfinite()
	w.SetContent(container.New(layout.NewCustomPaddedLayout(24, 24, 28, 28), container.NewVBox(
		container.NewCenter(icon),
		wrapText(pr.title, widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}, Alignment: fyne.TextAlignCenter}),
		wrapText(pr.hint+" Tool calls that need the database are refused meanwhile, and say why.", widget.RichTextStyle{Alignment: fyne.TextAlignCenter}),
		detail,
		bar,
		container.NewCenter(status),
		container.NewCenter(quit),
	)))
	w.Resize(fyne.NewSize(520, 0))
	w.SetMaster()
	w.CenterOnScreen()
	w.Show()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(waitRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := open(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				msg := explain("open the home folder", err).text
				fyne.Do(func() { setText(detail, msg) })
				continue
			}
			fyne.Do(func() {
				if ctx.Err() != nil {
					st.Close()
					return
				}
				opened(st)
				w.Hide()
			})
			return
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
