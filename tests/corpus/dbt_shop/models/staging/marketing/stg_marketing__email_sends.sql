select
    send_id,
    campaign_id,
    recipient_email,
    sent_at,
    opened_at,
    first_click_at,
    opened_at is not null as is_opened,
    first_click_at is not null as is_clicked,
    unsubscribed
from {{ source('marketing', 'email_sends') }}
